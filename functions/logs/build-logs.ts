/**
 * Build logs of one deployment: a page (oldest first, with a cursor) and an SSE
 * stream that ends with an `end` event once the deployment is finished and every
 * build line was sent. Both accept the deployment-session token (`wsd_…`) of the
 * deployment's project (shared/http/guard.ts).
 */
import { z } from "@hono/zod-openapi";
import { FINISHED } from "../deployments/store";
import { notFound } from "../../shared/http/errors";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { lastEventIdOf, sseResponse } from "../../shared/http/sse";
import { LogCursor, LogLimit, LastEventIdQuery, SSE_200, SSE_DESCRIPTION, STREAM_BATCH } from "./query";
import { lineNamer } from "./environment-names";
import { LogPageSchema } from "./schema";
import { deploymentState, readBuildLines } from "./store";

const TAGS = ["Logs"];
const IdParam = z.object({ id: pathId("id", "The deployment id (`dpl_…`)") });

const page = defineRoute({
  method: "get",
  path: "/deployments/{id}/logs",
  tags: TAGS,
  summary: "A page of a deployment's build log, oldest first",
  description: [
    "The build lines (install, build, start-up and the runner's own `system` lines) of one deployment, oldest first.",
    "`limit` 1-1000 (default 100); `nextCursor` pages on to newer lines and is null once the lines written so far are all read (follow a running build with the `/stream` route).",
    "Each line: `{id, timestamp, deploymentId, environment, stream, message}`; `id` is the line's sequence number in its project; `environment` is the name of the deployment's environment. Lines over 16 KiB are cut there with a marker; ANSI escapes are kept as sent.",
    "Lines are kept 30 days and at most 50,000 build lines per project, counted apart from runtime and request lines, so a busy site never pushes its build logs out (the oldest go first; LOG_RETENTION_DAYS, LOG_RETENTION_BUILD_LINES).",
    "Accepts a deployment-session token (`wsd_…`) of the deployment's project. 404 for a deployment that is not the caller organization's; 400 naming `cursor` or `limit` when malformed.",
  ].join(" "),
  permission: "project:deployment:list",
  request: { params: IdParam, query: z.strictObject({ limit: LogLimit, cursor: LogCursor }) },
  responses: { 200: jsonResponse(LogPageSchema, "One page of build lines") },
});

const stream = defineRoute({
  method: "get",
  path: "/deployments/{id}/logs/stream",
  tags: TAGS,
  summary: "Follow a deployment's build log (Server-Sent Events)",
  description: [
    "The build log as `text/event-stream`, from its first line (or after `Last-Event-ID`).",
    'Each line is one event: `id: <seq>`, `event: log`, `data: <LogLine JSON>`. Once the deployment is finished (`ready`, `failed` or `canceled`) and every build line was sent, the stream sends `event: end` with `data: {"status": "<status>", "failureReason": <string|null>}` and closes.',
    SSE_DESCRIPTION,
    "Accepts a deployment-session token (`wsd_…`) of the deployment's project. 404 for a deployment that is not the caller organization's (answered before the stream opens).",
  ].join(" "),
  permission: "project:deployment:list",
  request: { params: IdParam, query: LastEventIdQuery },
  responses: { 200: SSE_200 },
});

export const buildLogsRouter = createRouter()
  .openapi(page, async (c) => {
    const { orgId } = callerOf(c);
    const { limit, cursor } = c.req.valid("query");
    const id = c.req.valid("param").id;
    const db = c.get("db");
    if (!(await deploymentState(db, orgId, id))) throw notFound("Deployment");
    const rows = await readBuildLines(db, orgId, id, cursor === undefined ? 0 : Number(cursor), limit + 1);
    const items = await lineNamer(db, orgId)(rows.slice(0, limit));
    return c.json({ items, nextCursor: rows.length > limit ? items[items.length - 1]!.id : null }, 200);
  })
  .openapi(stream, async (c) => {
    const { orgId } = callerOf(c);
    const id = c.req.valid("param").id;
    const db = c.get("db");
    let after = lastEventIdOf(c) ?? 0;
    const first = await deploymentState(db, orgId, id);
    if (!first) throw notFound("Deployment");
    // One namer for the stream: the deployment's environment is read with its first lines, then remembered.
    const named = lineNamer(db, orgId);
    return sseResponse(c, {
      grant: { permission: "project:deployment:list", projectId: first.projectId },
      next: async () => {
        // The status is read before the lines: every line written before it finished is then visible.
        const state = await deploymentState(db, orgId, id);
        const rows = await readBuildLines(db, orgId, id, after, STREAM_BATCH);
        const events = (await named(rows)).map((l) => ({ id: l.id, event: "log", data: JSON.stringify(l) }));
        if (rows.length > 0) after = rows[rows.length - 1]!.seq;
        if (rows.length === STREAM_BATCH) return { events, more: true };
        if (!state || FINISHED.includes(state.status)) {
          const end = state
            ? { status: state.status, failureReason: state.failureReason }
            : { status: "canceled", failureReason: "The deployment was deleted" };
          return { events: [...events, { event: "end", data: JSON.stringify(end) }], done: true };
        }
        return { events };
      },
    });
  });
