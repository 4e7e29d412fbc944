/**
 * Status and the free route. Disable pauses deploys and takes every route offline;
 * enable allows deploys and re-syncs the free route. Repeating either changes
 * nothing. Each is one conditional UPDATE, so concurrent calls cannot interleave.
 *
 * Syncing the free route records `<slug>.<shared domain>` (SHARED_DOMAIN is
 * configuration) as the route's host with the attempt's time. On a self-hosted
 * instance the state is what the edge really does: `synced` once its route table
 * (reloaded for the project) serves the hostname, else `pending`. The cloud has
 * no edge attached to this service: there the attempt is recorded as `synced`.
 */
import type { AppContext } from "../../shared/http/context";
import { ApiError } from "../../shared/http/errors";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { FreeRouteSchema, ProjectIdParam, ProjectSchema, STATUS_DOC } from "./schema";
import { findProject, freeHostname, freeRoute, projectView, updateProject, type ProjectRow } from "./store";

const enable = defineRoute({
  method: "post",
  path: "/projects/{id}/enable",
  tags: ["Projects"],
  summary: "Enable the project (allow deploys, bring it online)",
  description: `A disabled project leaves \`disabled\` (back to \`live\` or \`created\`) and its free route is re-synced; enabling an enabled project changes nothing. ${STATUS_DOC}`,
  permission: "project:write",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(ProjectSchema, "The project") },
});

const disable = defineRoute({
  method: "post",
  path: "/projects/{id}/disable",
  tags: ["Projects"],
  summary: "Disable the project (pause deploys, take it offline)",
  description: `The project becomes \`disabled\`: the deployments API refuses new deploys and the free route goes \`offline\`; configuration stays editable. Disabling a disabled project changes nothing. ${STATUS_DOC}`,
  permission: "project:write",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(ProjectSchema, "The project") },
});

const retry = defineRoute({
  method: "post",
  path: "/projects/{id}/routing/retry",
  tags: ["Projects"],
  summary: "Retry syncing the free route, without a rebuild",
  description:
    "Re-syncs `<slug>.<shared domain>` with the shared domain currently configured, and records the routing state and the attempt's time. 409 while the project is disabled (its routes stay offline until enabled).",
  permission: "project:write",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(FreeRouteSchema, "The free route after the attempt"), 409: { description: "The project is disabled" } },
});

/** The routing columns after a sync attempt: synced when the edge serves the hostname (self-hosted), else pending. */
async function syncFreeRoute(c: AppContext, row: ProjectRow, now: Date) {
  const hostname = freeHostname(row.slug, c.get("config"));
  const edge = c.get("services").edgeRoutes;
  const served = edge ? await edge.serves(row.id, hostname) : true;
  return served
    ? { routingState: "synced" as const, routingHost: hostname, routingLastAttemptAt: now, routingSyncedAt: now }
    : { routingState: "pending" as const, routingLastAttemptAt: now };
}

/** Runs a conditional UPDATE; when it matches nothing, the project as it is (or 404). */
async function transition(c: AppContext, id: string, run: (orgId: string, row: ProjectRow, now: Date) => Promise<ProjectRow | undefined>) {
  const { orgId } = callerOf(c);
  const current = await findProject(c.get("db"), orgId, id);
  return (await run(orgId, current, c.get("clock")())) ?? (await findProject(c.get("db"), orgId, id));
}

export const lifecycleRouter = createRouter()
  .openapi(enable, async (c) => {
    let enabled = false;
    let row = await transition(c, c.req.valid("param").id, async (orgId, current, now) => {
      const updated = await updateProject(c.get("db"), orgId, current.id, { disabledAt: null, updatedAt: now }, { ifDisabled: true });
      enabled = updated !== undefined;
      return updated;
    });
    // Only the call that enabled it re-syncs the route (against the edge as it is now); a repeat changes nothing.
    if (enabled) {
      const now = c.get("clock")();
      row = (await updateProject(c.get("db"), row.orgId, row.id, await syncFreeRoute(c, row, now), { ifDisabled: false })) ?? row;
    }
    return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
  })
  .openapi(disable, async (c) => {
    const row = await transition(c, c.req.valid("param").id, (orgId, current, now) =>
      updateProject(
        c.get("db"),
        orgId,
        current.id,
        { disabledAt: now, updatedAt: now, routingState: "offline", routingLastAttemptAt: now },
        { ifDisabled: false },
      ),
    );
    return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
  })
  .openapi(retry, async (c) => {
    const row = await transition(c, c.req.valid("param").id, async (orgId, current, now) =>
      current.disabledAt ? undefined : updateProject(c.get("db"), orgId, current.id, await syncFreeRoute(c, current, now), { ifDisabled: false }),
    );
    if (row.disabledAt) throw new ApiError("conflict", "The project is disabled; enable it to bring its routes back online");
    return c.json(freeRoute(row, c.get("config")), 200);
  });
