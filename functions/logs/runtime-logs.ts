/**
 * Runtime logs of a project (its apps' stdout and stderr, and the runner's
 * `system` lines about them): a filtered page, newest last, and an SSE stream.
 * Both accept the project's deployment-session token (shared/http/guard.ts).
 */
import { z } from "@hono/zod-openapi";
import { EnvironmentName, ProjectIdParam } from "../projects/schema";
import { findEnvironment } from "../projects/environments-store";
import { findProject } from "../projects/store";
import { LOG_STREAMS } from "../../shared/db/schema";
import type { AppContext } from "../../shared/http/context";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { lastEventIdOf, sseResponse } from "../../shared/http/sse";
import { DEFAULT_LOG_LIMIT, LastEventIdQuery, LogCursor, LogLimit, MAX_LOG_LIMIT, MAX_QUERY_CHARS, SSE_200, SSE_DESCRIPTION, STREAM_BATCH } from "./query";
import { lineNamer } from "./environment-names";
import { RuntimeLogPageSchema } from "./schema";
import { committedLastSeq, deploymentState, listRuntimeLines, logSearchSettings, lowestSeq, readRuntimeLines, type RuntimeFilter, ScanWindow } from "./store";

const TAGS = ["Logs"];

const Filters = {
  deploymentId: z.string().min(1).max(64).optional().openapi({ description: "Only lines of this deployment (one of the project's; else 400)" }),
  environment: EnvironmentName.optional().openapi({ description: "Only lines of the deployments of this environment (one of the project's; else 400)" }),
  stream: z.enum(LOG_STREAMS).optional().openapi({ description: "Only `stdout`, `stderr` or the runner's `system` lines" }),
  q: z
    .string()
    .min(1)
    .max(MAX_QUERY_CHARS)
    .optional()
    .openapi({
      description: `Only lines containing this text, case-insensitive (a plain substring, not a pattern; at most ${MAX_QUERY_CHARS} characters). No index serves it: the lines are read in short windows, newest first, and a page's search stops after about ${logSearchSettings.budgetMs / 1000} s or ${logSearchSettings.budgetRows.toLocaleString("en-US")} lines read, answering \`partial: true\` with what it found so far (see the response).`,
    }),
  since: z.iso.datetime({ offset: true }).optional().openapi({ description: "Only lines written at or after this time (ISO 8601)" }),
};

const RETENTION =
  "Lines are kept 30 days and at most 50,000 runtime lines per project, counted apart from build and request lines (the oldest go first; LOG_RETENTION_DAYS, LOG_RETENTION_RUNTIME_LINES).";
const LINE =
  "Each line: `{id, timestamp, deploymentId, environment, stream, message}`; `id` is the line's sequence number in the project; `deploymentId` and `environment` (the name of the deployment's environment, e.g. `production` or a preview's name) tell where it comes from, since lines of every environment are read together unless `environment` or `deploymentId` narrows them. Lines over 16 KiB are cut there with a marker; ANSI escapes are kept as sent.";
const SEARCH = `A search (\`q\`) is bounded so that it never holds the server: it reads the project's lines in short windows, newest first, and stops after about ${logSearchSettings.budgetMs / 1000} s or ${logSearchSettings.budgetRows.toLocaleString("en-US")} lines read. It then answers \`partial: true\`: \`items\` are every matching line from \`nextCursor\` (inclusive) up to the page's start (fewer than \`limit\`, possibly none) and \`nextCursor\` is where the search stopped; ask again with it as \`cursor\` (and the same filters) to search on through older lines. Pages read this way in turn are complete and never repeat a line. Without \`q\`, \`partial\` is always false.`;
const ERRORS =
  "404 for a project that is not the caller organization's; 400 naming the field for a malformed value, an unknown `environment` or a `deploymentId` that is not the project's. Accepts the project's deployment-session token (`wsd_…`).";

const page = defineRoute({
  method: "get",
  path: "/projects/{id}/logs",
  tags: TAGS,
  summary: "Runtime logs of a project, newest last",
  description: [
    `Without \`cursor\`, the newest \`limit\` (1-${MAX_LOG_LIMIT}, default ${DEFAULT_LOG_LIMIT}) lines that match, oldest first (newest last); \`nextCursor\` pages back to the \`limit\` older matching lines before them (again oldest first) and is null when there are none.`,
    "Filters: `deploymentId`, `environment` (name), `stream`, `since` (inclusive) and `until` (exclusive) as ISO 8601 times, `q` (case-insensitive substring).",
    SEARCH,
    LINE,
    RETENTION,
    ERRORS,
  ].join(" "),
  permission: "project:read",
  request: {
    params: ProjectIdParam,
    query: z.strictObject({
      ...Filters,
      until: z.iso.datetime({ offset: true }).optional().openapi({ description: "Only lines written before this time (ISO 8601)" }),
      limit: LogLimit,
      cursor: LogCursor.openapi({ description: "`nextCursor` of the previous page: the lines before it" }),
    }),
  },
  responses: { 200: jsonResponse(RuntimeLogPageSchema, "The matching lines, newest last") },
});

const stream = defineRoute({
  method: "get",
  path: "/projects/{id}/logs/stream",
  tags: TAGS,
  summary: "Follow a project's runtime logs (Server-Sent Events)",
  description: [
    "Runtime lines as `text/event-stream`, each one event: `id: <seq>`, `event: log`, `data: <LogLine JSON>`, in sequence order.",
    "Starts after `Last-Event-ID` when sent; else at the first line at or after `since` when given; else with the lines written from now on. `since` also keeps filtering; `deploymentId`, `environment`, `stream` and `q` filter as in the page route.",
    LINE,
    SSE_DESCRIPTION,
    RETENTION,
    ERRORS,
  ].join(" "),
  permission: "project:read",
  request: { params: ProjectIdParam, query: LastEventIdQuery.extend(Filters) },
  responses: { 200: SSE_200 },
});

/** The project (the one 404) and its filter, checked against it: 400 naming `environment` or `deploymentId`. */
async function scoped(
  c: AppContext,
  projectId: string,
  q: { deploymentId?: string; environment?: string; stream?: RuntimeFilter["stream"]; q?: string; since?: string; until?: string },
) {
  const { orgId } = callerOf(c);
  const db = c.get("db");
  const project = await findProject(db, orgId, projectId);
  const filter: RuntimeFilter = { stream: q.stream, q: q.q };
  if (q.since !== undefined) filter.since = new Date(q.since);
  if (q.until !== undefined) filter.until = new Date(q.until);
  if (filter.since && filter.until && filter.until <= filter.since) throw badRequest("until", "until must be later than since");
  if (q.environment !== undefined) {
    const env = await findEnvironment(db, project.id, q.environment);
    if (!env) throw badRequest("environment", `The project has no environment named ${q.environment}`);
    filter.environmentId = env.id;
  }
  if (q.deploymentId !== undefined) {
    const d = await deploymentState(db, orgId, q.deploymentId);
    if (d?.projectId !== project.id) throw badRequest("deploymentId", "The project has no such deployment");
    filter.deploymentId = q.deploymentId;
  }
  return { orgId, projectId: project.id, filter };
}

export const runtimeLogsRouter = createRouter()
  .openapi(page, async (c) => {
    const query = c.req.valid("query");
    const { orgId, projectId, filter } = await scoped(c, c.req.valid("param").id, query);
    const before = query.cursor === undefined ? undefined : Number(query.cursor);
    const { rows, more, partial, resumeBefore } = await listRuntimeLines(c.get("db"), orgId, projectId, filter, before, query.limit);
    const items = await lineNamer(c.get("db"), orgId)(rows);
    const nextCursor = partial ? String(resumeBefore) : more ? items[0]!.id : null;
    return c.json({ items, nextCursor, partial }, 200);
  })
  .openapi(stream, async (c) => {
    const query = c.req.valid("query");
    const { orgId, projectId, filter } = await scoped(c, c.req.valid("param").id, query);
    const db = c.get("db");
    const resume = lastEventIdOf(c);
    let after = resume ?? (filter.since !== undefined ? 0 : await committedLastSeq(db, projectId));
    // One namer for the stream: each deployment's environment is read with its first lines, then remembered.
    const named = lineNamer(db, orgId);
    // A search (`q`) reads bounded windows of line numbers, from the project's first line on (store.ts, ScanWindow).
    const search = filter.q !== undefined ? new ScanWindow() : undefined;
    if (search) {
      const first = await lowestSeq(db, projectId, Number.MAX_SAFE_INTEGER);
      if (first !== undefined) after = Math.max(after, first - 1);
    }
    return sseResponse(c, {
      grant: { permission: "project:read", projectId },
      next: async () => {
        // Every line up to the committed counter is visible: the cursor moves there even past lines the filters skip.
        const committed = await committedLastSeq(db, projectId);
        const upto = search ? Math.min(committed, after + search.size) : committed;
        const read = () => readRuntimeLines(db, orgId, projectId, filter, after, upto, STREAM_BATCH);
        const rows = search ? await search.read(read) : await read();
        const events = (await named(rows)).map((l) => ({ id: l.id, event: "log", data: JSON.stringify(l) }));
        if (rows.length === STREAM_BATCH) {
          after = rows[rows.length - 1]!.seq;
          return { events, more: true };
        }
        after = Math.max(after, upto);
        return upto < committed ? { events, more: true } : { events };
      },
    });
  });
