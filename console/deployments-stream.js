// @ts-check
/**
 * Follows one of the API's Server-Sent Event log streams (`event: log` per line, `id:` its
 * sequence number; the build stream ends with `event: end`).
 *
 * Read with fetch and a small SSE parser rather than EventSource: EventSource cannot send
 * headers, so it would lose X-Organization-Id (the organization chosen in the switcher) and
 * read the user's default organization instead, where this project is a 404. fetch sends
 * the same headers as every other call (api.js), the session cookie (same origin), and on a
 * reconnect `Last-Event-ID`, so a stream the server closed (it lives at most an hour) or a
 * dropped connection goes on after the last line shown, losing and repeating nothing.
 */
import { activeOrganization, api, ApiError } from "./api.js";

/** The longest event the parser holds (a line is at most 16 KiB, a little more as JSON): past it the stream is dropped. */
const MAX_EVENT_CHARS = 1024 * 1024;
/** Waits between reconnects after a failure: 1 s, 2 s, 4 s … up to 15 s. */
const RETRY_MS = [1_000, 2_000, 4_000, 8_000, 15_000];
/** Bytes of a refused stream's problem body that are read. */
const MAX_PROBLEM_CHARS = 16 * 1024;

/**
 * A line of any log stream: `environment` is its deployment's environment name (null for a line tied to no deployment).
 * @typedef {{id: string, timestamp: string, deploymentId: string | null, environment: string | null,
 *   stream: "stdout" | "stderr" | "system", message: string}} LogLine
 * @typedef {"connecting" | "live" | "reconnecting"} StreamState
 * @typedef {{
 *   lastEventId?: string,
 *   onLines: (lines: LogLine[]) => void,
 *   onEnd?: (end: {status: string, failureReason: string | null}) => void,
 *   onState: (state: StreamState, detail?: string) => void,
 *   onFail: (error: ApiError) => void,
 *   alive: () => boolean,
 * }} FollowOptions
 */

/**
 * Follows `path` (after /api) until `close()`, an `end` event, a refusal (4xx), or `alive()` turning false.
 * @param {string} path
 * @param {FollowOptions} opts
 * @returns {{close: () => void}}
 */
export function followStream(path, opts) {
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
          // Refused (signed out, role changed, deployment gone): reconnecting would be refused again.
          if (e.status === 401) void api("GET", "/me").catch(() => {}); // lets api.js send the user to sign-in
          opts.onFail(e);
          return;
        }
        failures++;
      }
      if (ended || stopped()) return;
      // Closed by the server without an end (its one-hour limit) or broken: go on after the last line.
      // A second's pause even after a clean close, so a server that keeps closing at once is not hammered.
      const wait = RETRY_MS[Math.min(Math.max(failures, 1), RETRY_MS.length) - 1] ?? 1_000;
      opts.onState("reconnecting", `retrying in ${wait / 1000} s`);
      await sleep(wait, abort.signal);
    }
  };

  /** One connection: resolves true after an `end` event, false when the server closed without one. */
  const readOnce = async () => {
    /** @type {Record<string, string>} */
    const headers = { accept: "text/event-stream" };
    const org = activeOrganization();
    if (org) headers["x-organization-id"] = org;
    if (lastEventId) headers["last-event-id"] = lastEventId;
    const res = await fetch(`/api${path}`, { headers, credentials: "same-origin", cache: "no-store", signal: abort.signal });
    if (!res.ok || !res.body) throw await refusal(res);
    opts.onState("live");
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    abort.signal.addEventListener("abort", () => void reader.cancel().catch(() => {}), { once: true });
    const parser = sseParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      if (!opts.alive()) {
        abort.abort();
        return true;
      }
      /** @type {LogLine[]} */
      const lines = [];
      let end;
      for (const event of parser.push(value)) {
        if (event.id) lastEventId = event.id;
        if (event.type === "log") lines.push(JSON.parse(event.data));
        else if (event.type === "end") end = JSON.parse(event.data);
      }
      if (lines.length) opts.onLines(lines);
      if (end?.reason) {
        // Closed because access was lost (revoked, removed, project deleted): a refusal, not the build's end.
        opts.onFail(new ApiError(403, { status: 403, title: "Forbidden", detail: end.detail ?? end.reason }));
        abort.abort();
        return true;
      }
      if (end) {
        opts.onEnd?.(end);
        abort.abort();
        return true;
      }
    }
  };

  void run().catch((e) => {
    if (!stopped()) opts.onFail(e instanceof ApiError ? e : new ApiError(0, { status: 0, title: "Stream failed", detail: String(e) }));
  });
  return { close: () => abort.abort() };
}

/** @param {Response} res */
async function refusal(res) {
  const text = (await res.text().catch(() => "")).slice(0, MAX_PROBLEM_CHARS);
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
