/**
 * Following a log stream (`text/event-stream`) as the logs routes send it: each
 * line `id: <seq>`, `event: log`, `data: <LogLine JSON>`; a build stream ends with
 * `event: end`, `data: {"status", "failureReason"}`; `: keep-alive` comments in
 * between. A stream that drops before its end (a network failure, the server's
 * stream time limit, a restart) is reopened with `Last-Event-ID`: nothing is lost
 * or repeated. Bounded: an event over 1 MiB is refused.
 */
import { CliError, reasonOf } from "./api";

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

export interface LogLine {
  id: string;
  timestamp: string;
  deploymentId: string | null;
  /** The deployment's environment (`production`, a preview's name); absent from servers older than the field. */
  environment?: string | null;
  stream: string;
  message: string;
}

export interface StreamEnd {
  status: "ready" | "failed" | "canceled";
  failureReason: string | null;
}

/** The `end` of a stream closed because the caller lost access (revoked, removed, project deleted). */
interface AccessEnd {
  reason: string;
  detail?: string;
}

const MAX_EVENT_CHARS = 1024 * 1024;

/** Parses an SSE body into events (the WHATWG rules: `field: value` lines, a blank line dispatches, `:` starts a comment). */
export async function* parseSse(body: ReadableStream<Uint8Array>, onActivity: () => void = () => {}): AsyncGenerator<SseEvent> {
  const reader = body.pipeThrough(new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>).getReader();
  let buffer = "";
  let event = { id: undefined as string | undefined, event: "", data: [] as string[], size: 0 };
  const reset = () => {
    event = { id: undefined, event: "", data: [], size: 0 };
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onActivity();
      buffer += value;
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buffer);
        if (!m) break;
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (m[0] === "\r" && m.index === buffer.length - 1) break;
        const line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === "") {
          if (event.data.length > 0 || event.event)
            yield { ...(event.id !== undefined ? { id: event.id } : {}), event: event.event || "message", data: event.data.join("\n") };
          reset();
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const val = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        event.size += val.length;
        if (event.size > MAX_EVENT_CHARS) throw new CliError("The log stream sent an event over 1 MiB");
        if (field === "data") event.data.push(val);
        else if (field === "event") event.event = val;
        else if (field === "id" && !val.includes("\0")) event.id = val;
      }
      if (buffer.length > MAX_EVENT_CHARS) throw new CliError("The log stream sent a line over 1 MiB");
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

export interface FollowOptions {
  url: string;
  /** Start after this event id (the last line already shown). */
  lastEventId?: string;
  /** The bearer token for each (re)connection. */
  token: () => string;
  onLine: (line: LogLine) => void;
  /** Called once on a 401 (an expired session token): mint a new one; then the stream is reopened. */
  refresh?: () => Promise<void>;
  /** Reports reconnections (stderr in the command). */
  note?: (text: string) => void;
  /** Nothing at all (not even a keep-alive) for this long: the connection is taken as dead and reopened. */
  idleMs?: number;
  /** First wait before a reconnection; doubles up to 5 s. */
  retryMs?: number;
  /** Consecutive failed connections (none delivering a line) before giving up. */
  maxFailures?: number;
  signal?: AbortSignal;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

/**
 * Follows the stream at `url` until its `end` event (returned), reconnecting with
 * `Last-Event-ID` when it drops. A stream without an end (runtime logs) runs until
 * `signal` aborts: then it resolves with undefined.
 */
export async function follow(opts: FollowOptions): Promise<StreamEnd | undefined> {
  const idleMs = opts.idleMs ?? 45_000;
  const maxFailures = opts.maxFailures ?? 8;
  let lastId: string | undefined = opts.lastEventId;
  let failures = 0;
  let refreshed = false;
  let wait = opts.retryMs ?? 500;
  const path = new URL(opts.url).pathname;
  const retry = async (why: string) => {
    failures++;
    if (failures > maxFailures) throw new CliError(`GET ${path}: the log stream keeps failing (${why})`);
    opts.note?.(`The log stream dropped (${why}); reconnecting${lastId ? ` after line ${lastId}` : ""}…\n`);
    await sleep(wait, opts.signal);
    wait = Math.min(wait * 2, 5000);
  };
  while (!opts.signal?.aborted) {
    const connection = new AbortController();
    const onAbort = () => connection.abort();
    opts.signal?.addEventListener("abort", onAbort);
    let idle: ReturnType<typeof setTimeout> | undefined;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => connection.abort(new Error(`nothing received for ${Math.round(idleMs / 1000)} s`)), idleMs);
    };
    let delivered = false;
    try {
      touch();
      const headers: Record<string, string> = { authorization: `Bearer ${opts.token()}`, accept: "text/event-stream" };
      if (lastId !== undefined) headers["last-event-id"] = lastId;
      let res: Response;
      try {
        res = await fetch(opts.url, { headers, signal: connection.signal });
      } catch (e) {
        if (opts.signal?.aborted) return undefined;
        await retry(reasonOf(connection.signal.reason ?? e));
        continue;
      }
      if (res.status === 401 && opts.refresh && !refreshed) {
        await res.body?.cancel();
        refreshed = true;
        await opts.refresh();
        continue;
      }
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => "");
        if (res.status >= 500 || res.status === 429) {
          await retry(`HTTP ${res.status}`);
          continue;
        }
        let detail = text.slice(0, 200);
        try {
          detail = JSON.parse(text).detail ?? detail;
        } catch {}
        throw new CliError(`GET ${path}: ${res.status} ${detail}`);
      }
      refreshed = false;
      try {
        for await (const ev of parseSse(res.body, touch)) {
          if (ev.id !== undefined) lastId = ev.id;
          if (ev.event === "log") {
            delivered = true;
            opts.onLine(JSON.parse(ev.data) as LogLine);
          } else if (ev.event === "end") {
            const end = JSON.parse(ev.data) as StreamEnd | AccessEnd;
            // Closed because the caller lost access (not the build's end): reconnecting would be refused.
            if ("reason" in end) throw new CliError(`GET ${path}: the log stream was closed: ${end.detail ?? end.reason}`);
            return end;
          }
        }
      } catch (e) {
        if (e instanceof CliError) throw e;
        if (opts.signal?.aborted) return undefined;
        if (delivered) failures = 0;
        await retry(reasonOf(connection.signal.reason ?? e));
        continue;
      }
      if (opts.signal?.aborted) return undefined;
      // Closed before the end (the server's stream time limit, a restart): reopen where it stopped.
      if (delivered) failures = 0;
      await retry("closed before its end");
    } finally {
      clearTimeout(idle);
      opts.signal?.removeEventListener("abort", onAbort);
    }
  }
  return undefined;
}
