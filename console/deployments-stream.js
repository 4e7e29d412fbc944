// @ts-check
/**
 * Follows one of the API's log streams (`event: log` per line, `id:` its sequence number; the
 * build stream ends with `event: end`) through event-stream.js: a build's end goes to `onEnd`,
 * an end for lost access (revoked, removed, project deleted) to `onFail` as a 403.
 */
import { ApiError } from "./api.js";
import { followEvents } from "./event-stream.js";

/**
 * A line of any log stream: `environment` is its deployment's environment name (null for a line tied to no deployment).
 * @typedef {{id: string, timestamp: string, deploymentId: string | null, environment: string | null,
 *   stream: "stdout" | "stderr" | "system", message: string}} LogLine
 * @typedef {import("./event-stream.js").StreamState} StreamState
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
  return followEvents(path, {
    event: "log",
    lastEventId: opts.lastEventId,
    onEvents: (/** @type {LogLine[]} */ lines) => opts.onLines(lines),
    onEnd: (end) => {
      // Closed because access was lost: a refusal, not the build's end.
      if (end.reason) opts.onFail(new ApiError(403, { status: 403, title: "Forbidden", detail: end.detail ?? end.reason }));
      else opts.onEnd?.({ status: end.status ?? "", failureReason: end.failureReason ?? null });
    },
    onState: opts.onState,
    onFail: opts.onFail,
    alive: opts.alive,
  });
}
