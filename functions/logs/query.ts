/** Query parameters and response pieces the log routes share. */
import { z } from "@hono/zod-openapi";
import { sseSettings } from "../../shared/http/sse";

/** Lines per SSE read (one chunk written to the client). */
export const STREAM_BATCH = 500;
export const MAX_LOG_LIMIT = 1000;
export const DEFAULT_LOG_LIMIT = 100;
/** Longest `q` (characters). */
export const MAX_QUERY_CHARS = 200;

const SEQ = /^[0-9]{1,15}$/;

export const LogLimit = z.coerce
  .number()
  .int()
  .min(1)
  .max(MAX_LOG_LIMIT)
  .default(DEFAULT_LOG_LIMIT)
  .openapi({ description: `Lines per page, 1-${MAX_LOG_LIMIT} (default ${DEFAULT_LOG_LIMIT})` });

export const LogCursor = z
  .string()
  .regex(SEQ, "must be the nextCursor of a previous page")
  .optional()
  .openapi({ description: "`nextCursor` of the previous page" });

export const LastEventIdQuery = z.strictObject({
  lastEventId: z
    .string()
    .regex(SEQ, "must be the id of an event of this stream (a decimal number)")
    .optional()
    .openapi({ description: "Resume after this event id, for clients that cannot send the `Last-Event-ID` header (the header wins when both are sent)" }),
});

const seconds = (ms: number) => `${ms / 1000} s`;

export const SSE_DESCRIPTION = [
  "`Last-Event-ID` (header; `lastEventId` in the query for clients that cannot set it) resumes after that event without losing or repeating a line: sequence numbers are handed out under a per-project lock held until the writer commits, so lines become visible in order.",
  `A comment line \`: keep-alive\` is sent every ${seconds(sseSettings.heartbeatMs)}.`,
  `New lines arrive at once on the self-hosted server (its log writer wakes the stream) and within ${seconds(sseSettings.pollMs)} otherwise: on the Worker, which runs no writer, a stream polls the database every ${seconds(sseSettings.pollMs)}.`,
  `A stream lives at most ${sseSettings.maxStreamMs / 60_000} minutes, then closes without an end event; reconnect with \`Last-Event-ID\` (EventSource does) to go on. It also ends when the client disconnects.`,
  `Access is asked again every ${seconds(sseSettings.accessCheckMs)} while the stream is open: once the caller may no longer read it (removed from the organization, a role or token without the route's permission, the token revoked or expired, the session ended) the stream sends \`event: end\` with \`data: {"reason": "access revoked", "detail": "<why>"}\`, or \`{"reason": "project deleted", …}\` once the project is deleted, and closes: reconnecting is then refused.`,
].join(" ");

export const SSE_200 = {
  description: "`text/event-stream`: `id: <seq>`, `event: log`, `data: <LogLine JSON>` per line, and `: keep-alive` comments",
  content: { "text/event-stream": { schema: z.string().openapi({ description: "Server-Sent Events" }) } },
} as const;
