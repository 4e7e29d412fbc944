// @ts-check
/**
 * Follows one of the API's Server-Sent Event streams (data events of one name, e.g. `log` or
 * `request`, each with an `id:`; `event: end` closes it). Every stream of the console goes
 * through here (deployments-stream.js for logs, request-logs.js for server logs).
 *
 * Read with fetch and a small SSE parser rather than EventSource: EventSource cannot send
 * headers, so it would lose X-Organization-Id (the organization chosen in the switcher) and
 * read the user's default organization instead, where the project is a 404. fetch sends the
 * same headers as every other call (api.js), the session cookie (same origin), and on a
 * reconnect `Last-Event-ID`, so a stream the server closed (it lives at most an hour) or a
 * dropped connection goes on after the last event shown, losing and repeating nothing.
 *
 * Heartbeats: the API sends `: keep-alive` every 15 s, so a connection silent for much longer
 * (a proxy or a sleeping laptop that kept the socket but lost the server) is dropped and
 * resumed, rather than showing "live" over a dead connection.
 *
 * An `end` event stops the stream for good and goes to `onEnd` with its data: a build's end
 * (`{status, failureReason}`) or a lost access (`{reason, detail}`: revoked, removed, project
 * deleted), after which reconnecting would be refused.
 */
import { activeOrganization, api, ApiError } from "./api.js";

/** The longest event the parser holds (a line is at most 16 KiB, a little more as JSON): past it the stream is dropped. */
const MAX_EVENT_CHARS = 1024 * 1024;
/** Waits between reconnects after a failure: 1 s, 2 s, 4 s … up to 15 s. */
const RETRY_MS = [1_000, 2_000, 4_000, 8_000, 15_000];
/** Three missed heartbeats: the connection is taken for dead. */
export const SILENCE_MS = 45_000;

/**
 * @typedef {"connecting" | "live" | "reconnecting"} StreamState
 * @typedef {{reason?: string, detail?: string, status?: string, failureReason?: string | null}} StreamEnd
 */

/**
 * @template T
 * @typedef {{
 *   event: string,
 *   lastEventId?: string,
 *   onEvents: (items: T[]) => void,
 *   onEnd: (end: StreamEnd) => void,
 *   onState: (state: StreamState, detail?: string) => void,
 *   onFail: (error: ApiError) => void,
 *   alive: () => boolean,
 *   silenceMs?: number,
 * }} FollowEventsOptions
 */

/**
 * Follows `path` (after /api) until `close()`, an `end` event, a refusal (4xx) or `alive()` turning false.
 * @template T
 * @param {string} path
 * @param {FollowEventsOptions<T>} opts
 * @returns {{close: () => void}}
 */
export function followEvents(path, opts) {
  const abort = new AbortController();
  let lastEventId = opts.lastEventId;
  let failures = 0;
  const stopped = () => abort.signal.aborted || !opts.alive();

  const run = async () => {
    while (!stopped()) {
      opts.onState(failures === 0 ? "connecting" : "reconnecting");
      let ended = false;
      try {
        ended = await readOnce();
        failures = 0;
      } catch (e) {
        if (stopped()) return;
        if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 429) {
          if (e.status === 401) void api("GET", "/me").catch(() => {}); // lets api.js send the user to sign-in
          opts.onFail(e);
          return;
        }
        failures++;
      }
      if (ended || stopped()) return;
      const wait = RETRY_MS[Math.min(Math.max(failures, 1), RETRY_MS.length) - 1] ?? 1_000;
      opts.onState("reconnecting", `retrying in ${wait / 1000} s`);
      await sleep(wait, abort.signal);
    }
  };

  /** One connection: true after an `end` event, false when it closed (or fell silent) without one. */
  const readOnce = async () => {
    // Its own controller, so a silent connection can be dropped without stopping the stream.
    const connection = new AbortController();
    const stop = () => connection.abort();
    abort.signal.addEventListener("abort", stop, { once: true });
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let watchdog;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(stop, opts.silenceMs ?? SILENCE_MS);
    };
    try {
      /** @type {Record<string, string>} */
      const headers = { accept: "text/event-stream" };
      const org = activeOrganization();
      if (org) headers["x-organization-id"] = org;
      if (lastEventId) headers["last-event-id"] = lastEventId;
      arm();
      const res = await fetch(`/api${path}`, { headers, credentials: "same-origin", cache: "no-store", signal: connection.signal });
      if (!res.ok || !res.body) throw await refusal(res);
      opts.onState("live");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      connection.signal.addEventListener("abort", () => void reader.cancel().catch(() => {}), { once: true });
      const parser = sseParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        // Any bytes, a keep-alive comment included, prove the connection alive.
        arm();
        if (!opts.alive()) {
          abort.abort();
          return true;
        }
        /** @type {T[]} */
        const items = [];
        let end;
        for (const event of parser.push(value)) {
          if (event.id) lastEventId = event.id;
          if (event.type === opts.event) items.push(JSON.parse(event.data));
          else if (event.type === "end") end = JSON.parse(event.data);
        }
        if (items.length) opts.onEvents(items);
        if (end) {
          opts.onEnd(end);
          abort.abort();
          return true;
        }
      }
    } finally {
      clearTimeout(watchdog);
      abort.signal.removeEventListener("abort", stop);
    }
  };

  void run().catch((e) => {
    if (!stopped()) opts.onFail(e instanceof ApiError ? e : new ApiError(0, { status: 0, title: "Stream failed", detail: String(e) }));
  });
  return { close: () => abort.abort() };
}

/** @param {Response} res */
async function refusal(res) {
  const text = (await res.text().catch(() => "")).slice(0, 16 * 1024);
  let problem;
  try {
    problem = JSON.parse(text);
  } catch {
    problem = { status: res.status, title: res.statusText };
  }
  return new ApiError(res.status, problem && typeof problem === "object" ? problem : { status: res.status });
}

/** @param {number} ms @param {AbortSignal} signal */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
      { once: true },
    );
  });
}

/**
 * The event-stream format (HTML's rules): fields `id`, `event`, `data` (joined by newlines),
 * comments (`: keep-alive`) ignored, an event dispatched at a blank line; CR, LF and CRLF end lines.
 */
export function sseParser() {
  let buffer = "";
  let data = /** @type {string[]} */ ([]);
  let type = "";
  /** @type {string | undefined} */
  let id;
  return {
    /** @param {string} chunk @returns {{type: string, data: string, id: string | undefined}[]} */
    push(chunk) {
      buffer += chunk;
      const events = [];
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer);
        // A lone CR at the end may be the first half of a CRLF: wait for the next chunk.
        if (!match || (match[0] === "\r" && match.index === buffer.length - 1)) break;
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") {
          if (data.length) events.push({ type: type || "message", data: data.join("\n"), id });
          data = [];
          type = "";
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "event") type = value;
        else if (field === "id" && !value.includes("\0")) id = value;
      }
      if (buffer.length + data.reduce((n, d) => n + d.length, 0) > MAX_EVENT_CHARS) throw new Error("An event over 1 MiB: the stream is not one of the API's");
      return events;
    },
  };
}
