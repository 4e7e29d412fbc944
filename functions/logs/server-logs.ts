/**
 * Server logs of a project: one `request` line per request the self-hosted edge
 * served for it (functions/self-hosted/edge). A filtered page, a short-lived
 * stream token for browsers, and the SSE stream. Query strings and request
 * headers are never stored: they carry secrets.
 */
import { z } from "@hono/zod-openapi";
import { displayPrefix, generateToken, hashToken, LOG_STREAM_TOKEN_PREFIX } from "../../shared/auth/tokens";
import { capToParent } from "../../shared/auth/token-lifetime";
import type { AppContext } from "../../shared/http/context";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { lastEventIdOf, sseResponse } from "../../shared/http/sse";
import { ProjectIdParam } from "../projects/schema";
import { findProject } from "../projects/store";
import { committedLastSeq } from "./store";
import { DEFAULT_LOG_LIMIT, LastEventIdQuery, LogCursor, LogLimit, MAX_LOG_LIMIT, SSE_DESCRIPTION, STREAM_BATCH } from "./query";
import { createLogStreamToken, listRequestLines, readRequestLines, type RequestFilter, type RequestLineRow } from "./request-store";

const TAGS = ["Logs"];
/** A stream token must be used (the stream opened) within this; the open stream then lives on. */
export const STREAM_TOKEN_TTL_MS = 60_000;

export const RequestLineSchema = z
  .object({
    id: z.string().openapi({ description: "The line's sequence number in its project (decimal string): the SSE `id:`", example: "2048" }),
    timestamp: z.string().openapi({ description: "When the request finished (ISO 8601)" }),
    deploymentId: z
      .string()
      .nullable()
      .openapi({ description: "The deployment that served it (null: the edge answered before any app, e.g. nothing deployed)" }),
    method: z.string(),
    host: z.string().nullable().openapi({ description: "The Host header as sent" }),
    path: z.string().openapi({ description: "The path without its query string (queries carry secrets and are never stored); at most 2048 characters" }),
    status: z.number().int().openapi({ description: "The status sent to the client (499: the client went away first)" }),
    durationMs: z.number().int(),
    bytes: z.number().int().openapi({ description: "Response body bytes sent" }),
    clientAddress: z.string().openapi({ description: "The client as the edge saw it (the connection's peer, or X-Forwarded-For behind a trusted proxy)" }),
    environment: z.string().nullable().openapi({
      description: "The name of the environment whose app the host routes to (`production`, a preview's name), as build and runtime lines name theirs",
    }),
    rule: z.string().nullable().openapi({ description: "The route rule that refused the request (403/429), else null" }),
  })
  .openapi("ServerLogLine");
type RequestLine = z.infer<typeof RequestLineSchema>;

function view({ seq, line }: RequestLineRow): RequestLine {
  return {
    id: String(seq),
    timestamp: new Date(line.at).toISOString(),
    deploymentId: line.deploymentId,
    method: line.method,
    host: line.host,
    path: line.path,
    status: line.status,
    durationMs: line.durationMs,
    bytes: line.bytes,
    clientAddress: line.clientAddress,
    environment: line.environment,
    rule: line.rule,
  };
}

const Filters = {
  status: z
    .string()
    .regex(/^[1-5](?:xx|[0-9]{2})$/, "must be a status class such as 5xx or a code such as 404")
    .optional()
    .openapi({ description: "A status class (`2xx` … `5xx`) or an exact code (`404`)" }),
  method: z
    .string()
    .regex(/^[A-Z]{1,16}$/, "must be an HTTP method in capitals, such as GET")
    .optional()
    .openapi({ description: "Only requests with this method (`GET`, `POST`, …)" }),
  path: z
    .string()
    .max(200)
    .regex(/^\/[\x21-\x7e]*$/, "must start with '/' and contain printable ASCII without spaces")
    .optional()
    .openapi({ description: "Only paths starting with this prefix" }),
  since: z.iso.datetime({ offset: true }).optional().openapi({ description: "Only requests logged at or after this time (ISO 8601)" }),
};

function filterOf(q: { status?: string; method?: string; path?: string; since?: string }): RequestFilter {
  const f: RequestFilter = { method: q.method, path: q.path };
  if (q.status) f.status = q.status.endsWith("xx") ? { class: Number(q.status[0]) } : { code: Number(q.status) };
  if (q.since) f.since = new Date(q.since);
  return f;
}

const NOT_CLOUD =
  "Lines come from the edge that first received the request: the self-hosted edge, or on the cloud the Worker's, which forwards to the build server running the app (the server's own edge writes none for it).";
const RETENTION =
  "Request lines are kept 30 days and at most 50,000 per project, counted apart from build and runtime lines (LOG_RETENTION_DAYS, LOG_RETENTION_REQUEST_LINES).";

const recent = defineRoute({
  method: "get",
  path: "/projects/{id}/server-logs/recent",
  tags: TAGS,
  summary: "Recent requests to a project's apps",
  description: [
    `Without \`cursor\`, the newest \`limit\` (1-${MAX_LOG_LIMIT}, default ${DEFAULT_LOG_LIMIT}) matching requests, oldest first (newest last); \`nextCursor\` pages back to older ones.`,
    "Filters: `status` (a class `4xx` or a code `404`), `method`, `path` (prefix), `since`. 400 naming the field for a malformed value; 404 for a project that is not the caller organization's.",
    RETENTION,
    NOT_CLOUD,
  ].join(" "),
  permission: "project:read",
  request: { params: ProjectIdParam, query: z.strictObject({ ...Filters, limit: LogLimit, cursor: LogCursor }) },
  responses: {
    200: jsonResponse(
      z.object({ items: z.array(RequestLineSchema), nextCursor: z.string().nullable() }).openapi("ServerLogPage"),
      "The matching requests, newest last",
    ),
  },
});

const StreamTokenSchema = z
  .object({
    token: z.string().openapi({ description: "`wsl_…`: open the stream with it within `expiresAt` (60 s); shown only here" }),
    expiresAt: z.string(),
    streamUrl: z.string().openapi({ description: "The stream's absolute URL with the token in its query, ready for `new EventSource(streamUrl)`" }),
  })
  .openapi("ServerLogStreamToken");

const streamToken = defineRoute({
  method: "get",
  path: "/projects/{id}/server-logs/stream-token",
  tags: TAGS,
  summary: "Mint a short-lived token for a browser's server-log stream",
  description:
    "Browsers' EventSource cannot send an Authorization header, so the stream accepts this token in its `token` query parameter instead. The token is read-only, for this project's server-log stream only (403 on every other route and project), and must be used within 60 seconds (the stream then stays open; a reconnect after that needs a new token). Never past the calling token's own expiry. Each call mints a new token.",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(StreamTokenSchema, "The token and the URL to open") },
});

const stream = defineRoute({
  method: "get",
  path: "/projects/{id}/server-logs/stream",
  tags: TAGS,
  summary: "Follow a project's server logs (Server-Sent Events)",
  description: [
    "Request lines as `text/event-stream`: `id: <seq>`, `event: request`, `data: <ServerLogLine JSON>`.",
    "Authenticate with a bearer token holding `project:read`, or with a stream token (`wsl_…`, GET …/server-logs/stream-token) in the `token` query parameter; no other token is accepted in the query.",
    "Starts after `Last-Event-ID` when sent; else at the first line at or after `since`; else with requests logged from now on. `status`, `method` and `path` filter as in …/recent.",
    SSE_DESCRIPTION,
    NOT_CLOUD,
  ].join(" "),
  permission: "project:read",
  request: {
    params: ProjectIdParam,
    query: LastEventIdQuery.extend({ ...Filters, token: z.string().max(512).optional().openapi({ description: "A stream token (`wsl_…`)" }) }),
  },
  responses: {
    200: {
      description: "`text/event-stream`: `id: <seq>`, `event: request`, `data: <ServerLogLine JSON>` per request, and `: keep-alive` comments",
      content: { "text/event-stream": { schema: z.string().openapi({ description: "Server-Sent Events" }) } },
    },
  },
});

async function projectOf(c: AppContext, id: string) {
  const { orgId } = callerOf(c);
  const project = await findProject(c.get("db"), orgId, id);
  return { orgId, projectId: project.id };
}

export const serverLogsRouter = createRouter()
  .openapi(recent, async (c) => {
    const q = c.req.valid("query");
    const { orgId, projectId } = await projectOf(c, c.req.valid("param").id);
    const before = q.cursor === undefined ? undefined : Number(q.cursor);
    const { rows, more } = await listRequestLines(c.get("db"), orgId, projectId, filterOf(q), before, q.limit);
    const items = rows.map(view);
    return c.json({ items, nextCursor: more ? items[0]!.id : null }, 200);
  })
  .openapi(streamToken, async (c) => {
    const caller = callerOf(c);
    const { id } = c.req.valid("param");
    const token = generateToken(LOG_STREAM_TOKEN_PREFIX);
    const expiresAt = await capToParent(c.get("db"), caller.tokenId, new Date(c.get("clock")().getTime() + STREAM_TOKEN_TTL_MS));
    await createLogStreamToken(c.get("db"), id, {
      orgId: caller.orgId!,
      userId: caller.userId,
      tokenHash: hashToken(token),
      displayPrefix: displayPrefix(token),
      scopes: ["project:read"],
      expiresAt,
      parentId: caller.tokenId,
    });
    const base = (c.get("config").publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, "");
    const streamUrl = `${base}/api/projects/${encodeURIComponent(id)}/server-logs/stream?token=${encodeURIComponent(token)}`;
    return c.json({ token, expiresAt: expiresAt.toISOString(), streamUrl }, 200);
  })
  .openapi(stream, async (c) => {
    const q = c.req.valid("query");
    const { orgId, projectId } = await projectOf(c, c.req.valid("param").id);
    const db = c.get("db");
    const filter = filterOf(q);
    const resume = lastEventIdOf(c);
    let after = resume ?? (filter.since !== undefined ? 0 : await committedLastSeq(db, projectId));
    return sseResponse(c, {
      grant: { permission: "project:read", projectId },
      next: async () => {
        const upto = await committedLastSeq(db, projectId);
        const rows = await readRequestLines(db, orgId, projectId, filter, after, upto, STREAM_BATCH);
        const events = rows.map((r) => ({ id: String(r.seq), event: "request", data: JSON.stringify(view(r)) }));
        if (rows.length === STREAM_BATCH) {
          after = rows[rows.length - 1]!.seq;
          return { events, more: true };
        }
        after = Math.max(after, upto);
        return { events };
      },
    });
  });
