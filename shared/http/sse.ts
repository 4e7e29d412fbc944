/**
 * Server-Sent Events (`text/event-stream`) for the log streams, on both runtimes.
 *
 * - Each event carries `id:` (the line's sequence number); a client that reconnects
 *   sends the last one it processed in `Last-Event-ID` (EventSource does this
 *   itself) and the stream resumes after it, losing and repeating nothing
 *   (`lastEventId` in the query does the same for clients that cannot set headers).
 * - A comment line `: keep-alive` every `heartbeatMs` (15 s) keeps proxies from
 *   closing an idle stream.
 * - Between reads the stream waits for the in-process log feed (Node adapter: the
 *   writer wakes it at once) or at most `pollMs` (1 s): the Worker has no feed, so
 *   its streams poll the database once a second, and on Node the poll covers lines
 *   another process wrote.
 * - A stream ends when the client disconnects, when its source says it is done
 *   (a finished build), or after `maxStreamMs` (1 hour), when it closes without an
 *   end event and the client reconnects with `Last-Event-ID`: no request holds a
 *   connection (and, on the Worker, a database connection) forever.
 * - Access is asked again every `accessCheckMs` (2 s) while the stream lives
 *   (shared/auth/stream-access.ts): once the caller may no longer read it (removed,
 *   demoted, token revoked or expired, session ended, project deleted) the stream
 *   sends `event: end` with `data: {"reason", "detail"}` and closes, before reading
 *   another line. The check rides on the read loop, which turns at least every pollMs.
 * - Backpressure: the next batch is read only once the client took the previous one.
 */
import { currentSessionId } from "../auth/session";
import { type StreamGrant, streamAccessEnd } from "../auth/stream-access";
import type { LogFeed } from "../logs/feed";
import type { AppContext } from "./context";
import { describeError } from "./error-log";
import { badRequest } from "./errors";

/** The timings of every stream; tests shorten them (one module instance per test run, on either runtime). */
export const sseSettings = {
  heartbeatMs: 15_000,
  pollMs: 1_000,
  maxStreamMs: 60 * 60 * 1000,
  /** How often an open stream asks whether its caller may still read it: with pollMs, it ends within 5 s of a loss. */
  accessCheckMs: 2_000,
};

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

export interface SseBatch {
  events: SseEvent[];
  /** Send these, then close the stream. */
  done?: boolean;
  /** More is ready now: read again without waiting. */
  more?: boolean;
}

/** The header's (or the query fallback's) sequence number, or undefined when neither is sent. */
export function lastEventIdOf(c: AppContext): number | undefined {
  const header = c.req.header("last-event-id");
  const query = c.req.query("lastEventId");
  const raw = header ?? query;
  if (raw === undefined || raw === "") return undefined;
  if (!/^[0-9]{1,15}$/.test(raw))
    throw badRequest(header !== undefined ? "Last-Event-ID" : "lastEventId", "must be the id of an event of this stream (a decimal number)");
  return Number(raw);
}

const encoder = new TextEncoder();

function format(e: SseEvent): string {
  // `data` is one line of JSON (no raw newlines): one `data:` field per event.
  return `${e.id !== undefined ? `id: ${e.id}\n` : ""}event: ${e.event}\ndata: ${e.data}\n\n`;
}

/** Streams that have not ended yet, by request: the Worker keeps its per-request database Pool open until then. */
const streamEnds = new WeakMap<object, Promise<void>>();

/** Resolves when the request's event stream ends (at once when it answered no stream). */
export function streamEnded(c: object): Promise<void> {
  return streamEnds.get(c) ?? Promise.resolve();
}

function pause(ms: number, signal: AbortSignal, feed: LogFeed | undefined, key: string): Promise<void> {
  if (feed) return feed.wait(key, ms, signal);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Answers with an event stream of one project, read under `grant` (the route's
 * permission). `next` is called at once and after every wait; a wait ends at the
 * log feed's notify for the project, or after pollMs.
 */
export function sseResponse(c: AppContext, opts: { grant: StreamGrant; next: () => Promise<SseBatch> }): Response {
  const { heartbeatMs, pollMs, maxStreamMs, accessCheckMs } = sseSettings;
  const { grant } = opts;
  const db = c.get("db");
  const clock = c.get("clock");
  const caller = c.get("caller")!;
  const sessionId = currentSessionId(c);
  const feed = c.get("services").logFeed;
  const logger = c.get("logger");
  const requestId = c.get("requestId");
  const abort = new AbortController();
  const started = Date.now();
  // The guard has just checked access.
  let accessCheckDue = started + accessCheckMs;
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let finish!: () => void;
  streamEnds.set(
    c,
    new Promise<void>((resolve) => {
      finish = resolve;
    }),
  );
  const stop = () => {
    if (abort.signal.aborted) return;
    abort.abort();
    clearInterval(heartbeat);
    finish();
  };

  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        heartbeat = setInterval(() => {
          try {
            controller.enqueue(encoder.encode(": keep-alive\n\n"));
          } catch {
            stop();
          }
        }, heartbeatMs);
      },
      // Called whenever the client has taken what was sent: read until there is something to send.
      async pull(controller) {
        try {
          while (!abort.signal.aborted) {
            if (Date.now() - started >= maxStreamMs) break;
            if (Date.now() >= accessCheckDue) {
              const end = await streamAccessEnd(db, caller, sessionId, grant, clock());
              if (abort.signal.aborted) return;
              if (end) {
                controller.enqueue(encoder.encode(format({ event: "end", data: JSON.stringify(end) })));
                break;
              }
              accessCheckDue = Date.now() + accessCheckMs;
            }
            const batch = await opts.next();
            if (abort.signal.aborted) return;
            if (batch.events.length > 0) controller.enqueue(encoder.encode(batch.events.map(format).join("")));
            if (batch.done) break;
            if (batch.events.length > 0) return;
            if (!batch.more) await pause(Math.min(pollMs, Math.max(0, maxStreamMs - (Date.now() - started))), abort.signal, feed, grant.projectId);
          }
        } catch (error) {
          // The client reconnects with Last-Event-ID; nothing sent is lost. A read that fails after the client
          // left is that leaving's echo (on the Worker the request's Pool ends with the stream), not a failure.
          if (!abort.signal.aborted) logger.error("event stream failed", { requestId, ...describeError(error) });
        }
        if (!abort.signal.aborted) {
          stop();
          controller.close();
        }
      },
      cancel() {
        stop();
      },
    },
    { highWaterMark: 1 },
  );

  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      // Proxies that buffer (nginx) pass the stream through as it is written.
      "x-accel-buffering": "no",
      "x-request-id": requestId,
    },
  });
}
