/** What the benchmark scripts share: bounded integer settings, the admin connection, the server compiled as npm start runs it. */
import type { ChildProcess } from "node:child_process";
import { Agent, request } from "node:http";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import pg from "pg";
import { nodeBundleOptions } from "../functions/node-bundle.mjs";

/** An integer from the environment, within [min, max], else the fallback. */
export function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer in [${min}, ${max}], got '${raw}'`);
  return n;
}

/** The server each benchmark creates its own database on (and drops it afterwards). */
export const ADMIN_URL = process.env.BENCH_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

/** Runs `fn` on a short-lived admin connection (create and drop database). */
export async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** One figure of a benchmark, for `npm run bench:all`'s table (bench/all.ts, bench/RESULTS.md). */
export interface BenchResult {
  /** What is measured, e.g. "GET /api/settings throughput". */
  measure: string;
  /** The figure with its unit, e.g. "4,210 req/s". */
  figure: string;
  /** The floor it is compared with in the same run (with its unit), or null when the target is absolute. */
  floor: string | null;
  /** figure / floor where that reads as a ratio (the direction the target states), else null. */
  ratio: number | null;
  /** The target as the issue states it, e.g. "≥ 0.9x the bare route". */
  target: string;
  met: boolean;
}

/** The line bench/all.ts collects: a marker and the result as JSON (one line, after the benchmark's own output). */
export const RESULT_MARKER = "bench-result ";

/** Prints a result for bench:all; a benchmark run on its own prints the same line (readable, and greppable). */
export function report(result: BenchResult): void {
  console.log(`${RESULT_MARKER}${JSON.stringify(result)}`);
}

/** 4210.4 → "4,210". */
export const thousands = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * A server process's entry (a .ts file) compiled as `npm start` compiles the server (functions/node-bundle.mjs),
 * into dist/bench/; returns the .mjs to run with plain `node`. Run through a transpile-on-the-fly loader (tsx)
 * instead, every closure created per request carries the loader's helper calls, and the server would be
 * measured slower than it runs in production.
 */
export async function compiledEntry(entry: string): Promise<string> {
  const outdir = join(resolve(dirname(fileURLToPath(import.meta.url)), ".."), "dist", "bench");
  const name = basename(entry).replace(/\.ts$/, "");
  await build(nodeBundleOptions({ [name]: entry }, outdir));
  return join(outdir, `${name}.mjs`);
}

/** The next IPC message of `type` from a benchmark's child process; rejects when it exits first or after timeoutMs. */
export function waitForMessage<T>(child: ChildProcess, type: string, timeoutMs: number, who: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (msg: { type?: string }) => {
      if (msg?.type !== type) return;
      done();
      resolve(msg as T);
    };
    const onExit = (code: number | null, signal: string | null) => {
      done();
      reject(new Error(`${who} exited (code ${code}, signal ${signal}) before '${type}'`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${who} sent no '${type}' within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
    };
    child.on("message", onMessage);
    child.on("exit", onExit);
  });
}

/** Sends `{type}` to the child and waits for its `reply`. */
export async function ask<T>(child: ChildProcess, type: string, reply: string, who: string): Promise<T> {
  const answer = waitForMessage<T>(child, reply, 5_000, who);
  child.send({ type });
  return answer;
}

/** SIGTERM, then SIGKILL after 20 s; resolves once it exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited;
  clearTimeout(timer);
}

/** Keep-alive, like a browser or a load generator: the latencies are the servers', not TCP handshakes. */
const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });

/**
 * GET over node:http, Host header as given: fetch() replaces a Host header with the URL's
 * authority, so a request "to an app through the edge" would reach the API's console instead.
 */
export function httpGet(url: string, host?: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, agent: keepAlive, headers: host ? { ...headers, host } : headers },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const percentileOf = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

/**
 * `requests` sequential GETs (after 20 unmeasured), p50 and p99 in ms; every answer must be a 200 with
 * `expectedBody` when given (the app's own answer, not a page of the API or the edge).
 */
export async function sequentialLatency(
  url: string,
  requests: number,
  opts: { host?: string; expectedBody?: string; headers?: Record<string, string> } = {},
): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = -20; i < requests; i++) {
    const t = performance.now();
    const res = await httpGet(url, opts.host, opts.headers);
    const took = performance.now() - t;
    if (res.status !== 200) throw new Error(`${url} (Host ${opts.host ?? "as the URL"}): ${res.status}`);
    if (opts.expectedBody !== undefined && res.body !== opts.expectedBody) {
      throw new Error(`${url} (Host ${opts.host ?? "as the URL"}) answered something else than the app: ${res.body.slice(0, 200)}`);
    }
    if (i >= 0) times.push(took);
  }
  times.sort((a, b) => a - b);
  return { p50: percentileOf(times, 0.5), p99: percentileOf(times, 0.99) };
}
