/**
 * What bench:runners measures, the same way against either control plane (the self-hosted
 * API in bench/runners.ts, the Worker in bench/runners-worker.ts): idle runners long-polling
 * for work, the time from a deployment queued to a runner holding it, and sequential GETs
 * through a forwarding edge against a floor.
 */
import { performance } from "node:perf_hooks";
import { sequentialLatency } from "./common";

export const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
export const pct = (xs: number[], q: number) => sorted(xs)[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)]!;
export const median = (xs: number[]) => pct(xs, 0.5);
export const ms = (n: number) => `${n.toFixed(n < 10 ? 2 : 0)} ms`;

/** A JSON call with a bearer token; throws on a non-2xx answer. */
export async function call<T = Record<string, unknown>>(base: string, token: string, path: string, init: { method?: string; json?: unknown } = {}): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method: init.method ?? (init.json !== undefined ? "POST" : "GET"),
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : {}) as T;
}

export interface IdleRunner {
  stop(): void;
  /** Called with each job this runner claims (the caller decides what to do with it). */
  onJob: (handler: (job: { id: string }) => void) => void;
}

/** A runner with nothing to do: claims with `wait=25` in a loop, as `wsp runner` waits for work (runner/http-control.ts). */
export function idleRunner(base: string, token: string): IdleRunner {
  const abort = new AbortController();
  let handler: (job: { id: string }) => void = () => {};
  void (async () => {
    while (!abort.signal.aborted) {
      try {
        const res = await fetch(`${base}/api/runner/claim?wait=25`, { method: "POST", headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
        if (res.status === 200) handler((await res.json()) as { id: string });
        else await res.arrayBuffer();
        if (res.status === 429) await new Promise((r) => setTimeout(r, Number(res.headers.get("retry-after") ?? 1) * 1000));
      } catch {
        if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  return {
    stop: () => abort.abort(),
    onJob: (h) => {
      handler = h;
    },
  };
}

/**
 * `claims` redeploys of `projectId` (placed on a server), each timed from the API's answer
 * (queued) to one of `runners` receiving it; every claimed job is canceled at once, so the
 * runners stay idle. `firstId`: a deployment already queued, waited for before measuring.
 */
export async function claimLatencies(
  base: string,
  token: string,
  projectId: string,
  firstId: string,
  runners: IdleRunner[],
  claims: number,
): Promise<number[]> {
  const claimed = new Map<string, (at: number) => void>();
  const seen = new Map<string, number>();
  for (const r of runners) {
    r.onJob((job) => {
      const at = performance.now();
      seen.set(job.id, at);
      claimed.get(job.id)?.(at);
      void call(base, token, `/api/deployments/${job.id}/cancel`, { method: "POST" }).catch((e) => console.error("cancel:", (e as Error).message));
    });
  }
  const deadline = Date.now() + 30_000;
  while (!seen.has(firstId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const latencies: number[] = [];
  for (let i = 0; i < claims; i++) {
    const d = await call<{ id: string }>(base, token, "/api/deployments", { json: { projectId, target: "server" } });
    const answered = performance.now();
    const at = await new Promise<number>((ok, fail) => {
      const early = seen.get(d.id);
      if (early !== undefined) return ok(early);
      const timer = setTimeout(() => fail(new Error(`deployment ${d.id} not claimed within 30 s`)), 30_000);
      claimed.set(d.id, (t) => {
        clearTimeout(timer);
        ok(t);
      });
    });
    latencies.push(at - answered);
    // Spread over the runners' polls, as deploys arrive.
    await new Promise((r) => setTimeout(r, 50 + Math.random() * 250));
  }
  return latencies;
}

type Target = { url: string; host?: string; headers?: () => Promise<Record<string, string>> };

/**
 * `requests` sequential GETs to each target in turn, 4 interleaved rounds (the first discarded):
 * the median of the rounds' p50 and p99 per target. `headers` are made once per round (a signature
 * is valid for 30 s).
 */
export async function latencyRounds(
  targets: Record<string, Target>,
  requests: number,
  expectedBody: string,
): Promise<Record<string, { p50: number; p99: number }>> {
  const rounds: Array<Record<string, { p50: number; p99: number }>> = [];
  for (let round = 0; round < 4; round++) {
    const results: Record<string, { p50: number; p99: number }> = {};
    for (const [name, t] of Object.entries(targets)) {
      results[name] = await sequentialLatency(t.url, requests, { host: t.host, expectedBody, headers: await t.headers?.() });
    }
    if (round > 0) rounds.push(results);
  }
  return Object.fromEntries(
    Object.keys(targets).map((name) => [name, { p50: median(rounds.map((r) => r[name]!.p50)), p99: median(rounds.map((r) => r[name]!.p99)) }]),
  );
}
