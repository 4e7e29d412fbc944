/**
 * RunnerControl (control.ts) over HTTP: a build server's runner (`wsp runner`,
 * functions/cli/runner.ts) reaches the control plane through the runner protocol
 * (functions/servers/runner-*.ts) with its runner token; the same runner core
 * (runner.ts, pipeline.ts, the supervisor) runs on it as on the database control.
 *
 * - Transient failures (no answer, 5xx, 429) are retried with exponential backoff
 *   and full jitter (429's Retry-After is the least wait) for up to `retryForMs`;
 *   then the call throws and the runner's loops try again on their next pass.
 *   Nothing the runner runs stops because the API is unreachable: its apps keep
 *   running, and what it could not report is reported when the API answers again.
 * - 409 is "not yours" (control.ts's header): a write that no longer holds is a
 *   no-op or answers undefined/false, never retried. 404 is an unknown job.
 *   401 is a revoked token (the server was deleted): `onRevoked` is told.
 * - Every answer is read under a size cap; a source archive under the upload limit.
 * - Log lines are queued and sent in order, in batches per deployment, each line
 *   with a sequence number: the API stores only lines above the highest it holds
 *   for the job, so a batch retried after a lost answer is stored once. A job's
 *   sequence starts at this process's clock in microseconds (Date.now() × 1000)
 *   and counts up, so a restarted runner, or the runner that takes a job over
 *   after its lease ran out, numbers above what was stored before it (with
 *   clocks within the lease of each other).
 */
import { ApiError } from "../../../shared/http/errors";
import { readBodyBytes } from "../../../shared/http/json-body";
import type { Logger } from "../../../shared/http/logger";
import { MAX_UPLOAD_BYTES } from "../../../shared/storage/limits";
import type { DeploymentStatus } from "../../deployments/store";
import { capLine, type NewLogLine } from "../../logs/store";
import type { JobContext, RunnerControl, RunnerDeployment, SourceArchive } from "./control";

/** How long a claim waits on the API for a job (the protocol allows up to 25 s). */
export const CLAIM_WAIT_S = 20;
/** Ids per batch read (the protocol's cap). */
const MAX_IDS = 1000;
/** Log lines per batch, and the batch's largest body (the protocol allows 1000 lines and 1 MiB). */
const LOG_BATCH_LINES = 500;
const LOG_BATCH_BYTES = 512 * 1024;
/** Lines held while the API is unreachable; beyond, new lines are dropped (counted, said once sent again). */
const MAX_QUEUED_LINES = 20_000;
const LOG_FLUSH_MS = 500;
/** The largest JSON answer read (a job's context with its variables is the biggest). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 10_000;

export interface HeartbeatFacts {
  version?: string;
  capacity?: number;
  sandbox?: Record<string, string | number | boolean>;
  limits?: Record<string, string | number | boolean>;
  /** `wsp runner --labels`: replace the server's labels. */
  labels?: string[];
}

export interface HttpControlOptions {
  /** The API's base URL (`https://api.example.com`; the protocol is under /api). */
  api: string;
  /** The runner token (`wsr_…`). */
  token: string;
  logger: Logger;
  /** How long one call keeps retrying transient failures (default 30 s). */
  retryForMs?: number;
  /** The server's token was refused (401): the server was deleted. */
  onRevoked?: () => void;
}

export interface HttpControl extends RunnerControl {
  /** Reports the runner up with its facts: the server it is (its id names the runner's claims and apps), whether it is draining. */
  heartbeat(facts: HeartbeatFacts): Promise<{ serverId: string; draining: boolean }>;
  /** The runner stops: a waiting claim ends now (no job); later calls retry for 5 s at most (the handover is quick or skipped). */
  interrupt(): void;
  /** Stops the log sender after a last flush. */
  close(): Promise<void>;
}

/** An answer the control cannot use (4xx other than 404/409, or retries exhausted). */
export class ControlError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

interface Answer {
  status: number;
  body: unknown;
}

interface CallOptions {
  json?: unknown;
  signal?: AbortSignal;
  timeoutMs?: number;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/** Reads an answer under `max` bytes (shared/http/json-body.ts: a larger Content-Length is refused unread, a longer stream cut). */
async function readCapped(res: Response, max: number): Promise<string> {
  try {
    return new TextDecoder().decode(await readBodyBytes(res, max));
  } catch (e) {
    if (e instanceof ApiError && e.status === 413) throw new ControlError(`The API's answer is over ${max} bytes`);
    throw e;
  }
}

/** Passes a stream through, failing it once more than `max` bytes went by. */
function capStream(body: ReadableStream<Uint8Array>, max: number): ReadableStream<Uint8Array> {
  let size = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        size += chunk.byteLength;
        if (size > max) controller.error(new ControlError(`The source archive is over ${max} bytes`));
        else controller.enqueue(chunk);
      },
    }),
  );
}

const transient = (status: number) => status === 429 || status >= 500;

function retryAfterMs(res: Response): number {
  const raw = res.headers.get("retry-after");
  const seconds = raw ? Number(raw) : Number.NaN;
  return Number.isFinite(seconds) && seconds >= 0 ? Math.min(seconds * 1000, 60_000) : 0;
}

const detailOf = (body: unknown) => (body && typeof body === "object" && "detail" in body && typeof body.detail === "string" ? body.detail : undefined);

const chunks = <T>(items: T[], size: number): T[][] => {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
};

export function createHttpControl(options: HttpControlOptions): HttpControl {
  const base = new URL("/api/", options.api);
  let retryForMs = options.retryForMs ?? 30_000;
  /** Aborted when the runner stops: ends a waiting claim. */
  const stopping = new AbortController();
  const auth = { authorization: `Bearer ${options.token}` };

  /** One call, transient failures retried; 2xx, 404 and 409 come back, anything else throws. */
  async function call(method: string, path: string, init: CallOptions = {}): Promise<Answer> {
    const url = new URL(path.replace(/^\//, ""), base);
    const deadline = Date.now() + retryForMs;
    const signal = init.signal ?? new AbortController().signal;
    for (let attempt = 0; ; attempt++) {
      let why: string;
      let wait = 0;
      try {
        const res = await fetch(url, {
          method,
          headers: init.json === undefined ? auth : { ...auth, "content-type": "application/json" },
          body: init.json === undefined ? undefined : JSON.stringify(init.json),
          signal: AbortSignal.any([signal, AbortSignal.timeout(init.timeoutMs ?? REQUEST_TIMEOUT_MS)]),
        });
        if (!transient(res.status)) {
          const text = await readCapped(res, MAX_ANSWER_BYTES);
          const body = text ? (JSON.parse(text) as unknown) : undefined;
          if ((res.status >= 200 && res.status < 300) || res.status === 404 || res.status === 409) return { status: res.status, body };
          if (res.status === 401) options.onRevoked?.();
          throw new ControlError(`${method} ${url.pathname} answered ${res.status}: ${detailOf(body) ?? text.slice(0, 200)}`, res.status);
        }
        await res.body?.cancel().catch(() => {});
        why = `answered ${res.status}`;
        wait = retryAfterMs(res);
      } catch (error) {
        if (error instanceof ControlError) throw error;
        if (signal.aborted) throw new ControlError(`${method} ${url.pathname}: the runner is stopping`);
        why = (error as Error).message;
      }
      const backoff = Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
      const delay = Math.max(wait, backoff);
      if (Date.now() + delay > deadline || signal.aborted)
        throw new ControlError(`${method} ${url.pathname} failed (${why}); retried for ${retryForMs / 1000} s`);
      await sleep(delay, signal);
    }
  }

  const job = (id: string, suffix = "") => `runner/jobs/${encodeURIComponent(id)}${suffix}`;
  const ok = (a: Answer) => a.status >= 200 && a.status < 300;
  const asJob = (a: Answer) => (a.status === 200 ? (a.body as RunnerDeployment) : undefined);
  /** A write whose "not yours" (409) or unknown job (404) is a no-op. */
  const write = async (method: string, path: string, json?: unknown) => {
    await call(method, path, { json });
  };

  // The log sender.
  interface Queued {
    deploymentId: string;
    seq: number;
    line: { seq: number; kind: string; stream: string; at: string; message: string };
    bytes: number;
  }
  const queue: Queued[] = [];
  const nextSeq = new Map<string, number>();
  let dropped = 0;
  let sending: Promise<void> | undefined;
  let sendAgain = false;

  async function sendQueued(): Promise<void> {
    while (queue.length > 0) {
      const first = queue[0]!;
      const batch: Queued[] = [];
      let bytes = 0;
      for (const q of queue) {
        if (q.deploymentId !== first.deploymentId) break;
        if (batch.length >= LOG_BATCH_LINES || bytes + q.bytes > LOG_BATCH_BYTES) break;
        batch.push(q);
        bytes += q.bytes;
      }
      // On failure the lines stay queued, in order, for the next flush (a later batch of the job must not pass them).
      await call("POST", job(first.deploymentId, "/logs"), { json: { lines: batch.map((q) => q.line) } });
      queue.splice(0, batch.length);
    }
    if (dropped > 0) {
      options.logger.error("runner_logs_dropped", { lines: dropped, reason: `over ${MAX_QUEUED_LINES} lines queued while the API was unreachable` });
      dropped = 0;
    }
  }

  function flush(): Promise<void> {
    if (sending) {
      sendAgain = true;
      return sending;
    }
    sending = (async () => {
      do {
        sendAgain = false;
        await sendQueued();
      } while (sendAgain && queue.length > 0);
    })()
      .catch((error) => options.logger.error("runner_logs_unsent", { lines: queue.length, error: (error as Error).message }))
      .finally(() => {
        sending = undefined;
      });
    return sending;
  }
  const flushTimer = setInterval(() => {
    if (queue.length > 0) void flush();
  }, LOG_FLUSH_MS);
  flushTimer.unref?.();

  return {
    async heartbeat(facts) {
      const a = await call("POST", "runner/heartbeat", { json: facts });
      const body = a.body as { serverId: string; draining?: boolean };
      return { serverId: body.serverId, draining: body.draining === true };
    },
    interrupt() {
      stopping.abort();
      retryForMs = Math.min(retryForMs, 5_000);
    },
    async close() {
      clearInterval(flushTimer);
      await flush();
    },

    async claim() {
      if (stopping.signal.aborted) return undefined;
      try {
        const a = await call("POST", `runner/claim?wait=${CLAIM_WAIT_S}`, { timeoutMs: (CLAIM_WAIT_S + 15) * 1000, signal: stopping.signal });
        return a.status === 200 ? (a.body as RunnerDeployment) : undefined;
      } catch (error) {
        // Stopping: the waiting claim ends with no job.
        if (stopping.signal.aborted) return undefined;
        throw error;
      }
    },
    renew: async (id) => (await call("POST", job(id, "/renew"))).status === 200,
    advance: async (id, from, to, failureReason) =>
      asJob(await call("POST", job(id, "/advance"), { json: { from, to, failureReason: failureReason?.slice(0, 4000) } })),
    async markReady(id) {
      const a = await call("POST", job(id, "/ready"));
      if (a.status !== 200) throw new ControlError(`Deployment ${id} could not be made ready: ${detailOf(a.body) ?? a.status}`, a.status);
      return a.body as RunnerDeployment;
    },
    release: (id) => write("POST", job(id, "/release")),

    async job(id) {
      const a = await call("GET", job(id));
      return a.status === 200 ? (a.body as JobContext) : undefined;
    },
    async cloneCredential(id) {
      const a = await call("GET", job(id, "/clone-credential"));
      if (a.status !== 200) throw new ControlError(`The clone credential of ${id} is not this server's any more`, a.status);
      const body = a.body as { token: string | null; forwarded?: { username: string; password: string } | null };
      // A forwarded credential (git identity forwarding) was deleted on the control plane by this read: held in memory for this clone only.
      if (body.forwarded) return { username: body.forwarded.username, password: body.forwarded.password };
      return body.token ? { token: body.token } : null;
    },
    async openSource(id): Promise<SourceArchive> {
      const a = await call("GET", job(id, "/source"));
      if (a.status === 404) return { missing: /no upload store/i.test(detailOf(a.body) ?? "") ? "no-store" : "gone" };
      if (a.status !== 200) throw new ControlError(`The source of ${id} is not this server's any more`, a.status);
      const link = a.body as { url: string; requiresAuth: boolean };
      // The instance's own archive route takes the token: sent to the API's own origin only, whatever host the link names.
      let url = new URL(link.url);
      if (link.requiresAuth) url = new URL(`${url.pathname}${url.search}`, base.origin);
      const deadline = Date.now() + retryForMs;
      for (let attempt = 0; ; attempt++) {
        let why: string;
        try {
          const res = await fetch(url, { headers: link.requiresAuth ? auth : {} });
          if (res.ok && res.body) return { body: capStream(res.body, MAX_UPLOAD_BYTES) };
          await res.body?.cancel().catch(() => {});
          if (res.status === 404) return { missing: "gone" };
          if (!transient(res.status)) throw new ControlError(`The source download answered ${res.status}`, res.status);
          why = `answered ${res.status}`;
        } catch (error) {
          if (error instanceof ControlError) throw error;
          why = (error as Error).message;
        }
        const delay = Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
        if (Date.now() + delay > deadline) throw new ControlError(`The source download failed (${why})`);
        await sleep(delay);
      }
    },
    async discardSource(id) {
      try {
        await call("DELETE", job(id, "/source"));
      } catch (error) {
        options.logger.error("runner_discard_failed", { deploymentId: id, error: (error as Error).message });
      }
    },
    async sandboxUid(project, range) {
      const a = await call("GET", `runner/projects/${encodeURIComponent(project.id)}/sandbox-uid?first=${range.first}&last=${range.last}`);
      if (a.status !== 200) throw new ControlError(`No sandbox uid for project ${project.id}: ${detailOf(a.body) ?? a.status}`, a.status);
      return (a.body as { uid: number }).uid;
    },
    recordWorkDirBytes: (id, bytes) => write("PUT", job(id, "/work-dir-bytes"), { bytes }),
    async projectsAlive(projectIds) {
      const alive: string[] = [];
      for (const ids of chunks(projectIds, MAX_IDS))
        alive.push(...((await call("POST", "runner/projects/alive", { json: { ids } })).body as { ids: string[] }).ids);
      return alive;
    },

    log(line: NewLogLine) {
      if (!line.deploymentId) return;
      if (queue.length >= MAX_QUEUED_LINES) {
        dropped++;
        return;
      }
      const seq = nextSeq.get(line.deploymentId) ?? Date.now() * 1000;
      nextSeq.set(line.deploymentId, seq + 1);
      const message = capLine(line.message);
      queue.push({
        deploymentId: line.deploymentId,
        seq,
        line: { seq, kind: line.kind, stream: line.stream, at: line.at.toISOString(), message },
        bytes: message.length * 3 + 128,
      });
      if (queue.length >= LOG_BATCH_LINES) void flush();
    },
    flushLogs: () => flush(),
    async emit(event) {
      const id = event.data.deploymentId;
      if (typeof id !== "string") throw new ControlError("An event names its deployment (data.deploymentId)");
      const { deploymentId: _d, environmentId: _e, ...data } = event.data;
      await write("POST", job(id, "/events"), { category: event.category, title: event.title.slice(0, 200), message: event.message.slice(0, 8000), data });
    },

    setServing: (id, port) => write("PUT", job(id, "/serving"), { port }),
    forgetPorts: () => write("POST", "runner/forget-ports"),
    recordDown: (id) => write("POST", job(id, "/down")),
    clearServing: (id) => write("DELETE", job(id, "/serving")),
    setCrashed: async (id) => asJob(await call("POST", job(id, "/crashed"))),
    setAsleep: async (id, cutoff) => asJob(await call("POST", job(id, "/asleep"), { json: { cutoff: cutoff.toISOString() } })),
    async currentOf(environmentId) {
      const a = await call("GET", `runner/environments/${encodeURIComponent(environmentId)}/current`);
      return ok(a) ? ((a.body as { deployment: RunnerDeployment | null }).deployment ?? undefined) : undefined;
    },

    async environment(environmentId) {
      const a = await call("GET", `runner/environments/${encodeURIComponent(environmentId)}`);
      return a.status === 200 ? (a.body as { name: string; autoRollback: boolean }) : undefined;
    },
    async rollbackTarget(crashed) {
      const a = await call("GET", job(crashed.id, "/rollback-target"));
      return a.status === 200 ? ((a.body as { deployment: RunnerDeployment | null }).deployment ?? undefined) : undefined;
    },
    async promote(_orgId, id) {
      const a = await call("POST", job(id, "/promote"));
      if (a.status !== 200) throw new ControlError(detailOf(a.body) ?? `The promote answered ${a.status}`, a.status);
    },

    wakeAlwaysOn: async () => ((await call("POST", "runner/wake-always-on")).body as { woken: number }).woken,
    toServe: async () => ((await call("GET", "runner/serving")).body as { items: RunnerDeployment[] }).items,
    async stillServing(ids) {
      const out: string[] = [];
      for (const part of chunks(ids, MAX_IDS))
        out.push(...((await call("POST", "runner/deployments/still-serving", { json: { ids: part } })).body as { ids: string[] }).ids);
      return out;
    },
    async idle(ids, cutoff) {
      const out: string[] = [];
      for (const part of chunks(ids, MAX_IDS))
        out.push(...((await call("POST", "runner/deployments/idle", { json: { ids: part, cutoff: cutoff.toISOString() } })).body as { ids: string[] }).ids);
      return out;
    },
    async supersededBeyond(environmentId, keep) {
      const a = await call("GET", `runner/environments/${encodeURIComponent(environmentId)}/superseded?keep=${keep}`);
      return a.status === 200 ? (a.body as { ids: string[] }).ids : [];
    },
    markPruned: (id) => write("POST", job(id, "/pruned")),
    async statuses(ids) {
      const out: Record<string, DeploymentStatus> = {};
      for (const part of chunks(ids, MAX_IDS))
        Object.assign(
          out,
          ((await call("POST", "runner/deployments/statuses", { json: { ids: part } })).body as { statuses: Record<string, DeploymentStatus> }).statuses,
        );
      return out;
    },
  };
}
