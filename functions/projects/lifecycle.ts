/**
 * Status and the free route. Disable pauses deploys and takes every route offline;
 * enable allows deploys and re-syncs the free route. Repeating either changes
 * nothing. Each is one conditional UPDATE, so concurrent calls cannot interleave.
 *
 * Syncing the free route records `<slug>.<shared domain>` (SHARED_DOMAIN is
 * configuration) as the route's host with the attempt's time; the edge
 * integration that publishes routes plugs in at `syncFreeRoute`.
 */
import { and, eq, isNotNull, isNull } from "drizzle-orm";
import { projects } from "../../shared/db/schema";
import type { AppContext } from "../../shared/http/context";
import { ApiError } from "../../shared/http/errors";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { FreeRouteSchema, ProjectIdParam, ProjectSchema, STATUS_DOC } from "./schema";
import { findProject, freeHostname, freeRoute, projectView, type ProjectRow } from "./store";

const action = (path: string, summary: string, description: string, schema: typeof ProjectSchema | typeof FreeRouteSchema, what: string) =>
  defineRoute({
    method: "post",
    path: `/projects/{id}/${path}`,
    tags: ["Projects"],
    summary,
    description,
    permission: "project:write",
    request: { params: ProjectIdParam },
    responses: { 200: jsonResponse(schema, what) },
  });

const enable = action(
  "enable",
  "Enable the project (allow deploys, bring it online)",
  `A disabled project leaves \`disabled\` (back to \`live\` or \`created\`) and its free route is re-synced; enabling an enabled project changes nothing. ${STATUS_DOC}`,
  ProjectSchema,
  "The project",
);
const disable = action(
  "disable",
  "Disable the project (pause deploys, take it offline)",
  `The project becomes \`disabled\`: the deployments API refuses new deploys and the free route goes \`offline\`; configuration stays editable. Disabling a disabled project changes nothing. ${STATUS_DOC}`,
  ProjectSchema,
  "The project",
);
const retry = action(
  "routing/retry",
  "Retry syncing the free route, without a rebuild",
  "Re-syncs `<slug>.<shared domain>` with the shared domain currently configured, and records the routing state and the attempt's time. 409 while the project is disabled (its routes stay offline until enabled).",
  FreeRouteSchema,
  "The free route after the attempt",
);

/** The columns a successful sync of the free route writes. */
const syncFreeRoute = (slug: string, c: AppContext, now: Date) => ({
  routingState: "synced" as const,
  routingHost: freeHostname(slug, c.get("config")),
  routingLastAttemptAt: now,
  routingSyncedAt: now,
});

/** Runs a conditional UPDATE; when it matches nothing, the project as it is (or 404). */
async function transition(c: AppContext, id: string, run: (orgId: string, row: ProjectRow, now: Date) => Promise<ProjectRow | undefined>) {
  const { orgId } = callerOf(c);
  const current = await findProject(c.get("db"), orgId, id);
  return (await run(orgId, current, c.get("clock")())) ?? (await findProject(c.get("db"), orgId, id));
}

export const lifecycleRouter = createRouter()
  .openapi(enable, async (c) => {
    const row = await transition(c, c.req.valid("param").id, async (orgId, current, now) => {
      const [row] = await c.get("db")
        .update(projects)
        .set({ disabledAt: null, updatedAt: now, ...syncFreeRoute(current.slug, c, now) })
        .where(and(eq(projects.id, current.id), eq(projects.orgId, orgId), isNotNull(projects.disabledAt)))
        .returning();
      return row;
    });
    return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
  })
  .openapi(disable, async (c) => {
    const row = await transition(c, c.req.valid("param").id, async (orgId, current, now) => {
      const [row] = await c.get("db")
        .update(projects)
        .set({ disabledAt: now, updatedAt: now, routingState: "offline", routingLastAttemptAt: now })
        .where(and(eq(projects.id, current.id), eq(projects.orgId, orgId), isNull(projects.disabledAt)))
        .returning();
      return row;
    });
    return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
  })
  .openapi(retry, async (c) => {
    const row = await transition(c, c.req.valid("param").id, async (orgId, current, now) => {
      const [row] = await c.get("db")
        .update(projects)
        .set(syncFreeRoute(current.slug, c, now))
        .where(and(eq(projects.id, current.id), eq(projects.orgId, orgId), isNull(projects.disabledAt)))
        .returning();
      return row;
    });
    if (row.disabledAt) throw new ApiError("conflict", "The project is disabled; enable it to bring its routes back online");
    return c.json(freeRoute(row, c.get("config")), 200);
  });
