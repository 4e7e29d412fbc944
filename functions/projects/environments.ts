/**
 * Environments: every project has `production` from creation; previews are added
 * with a name and a branch. Names are unique per project (409 on a repeat). Each
 * reads whether its current deployment runs an older configuration (needsRedeploy).
 */
import { z } from "@hono/zod-openapi";
import { ENVIRONMENT_KINDS } from "../../shared/db/schema";
import { ApiError, notFound } from "../../shared/http/errors";
import { DEFAULT_LIMIT, MAX_LIMIT, pageOf, toPage, PageQuery } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { autoRollbackOf, createPreviewEnvironment, listEnvironments, setAutoRollback, type EnvironmentRow } from "./environments-store";
import { type RedeployState, redeployStates, UP_TO_DATE } from "../deployments/config-drift";
import { BranchName, CHANGES_DOC, EnvironmentName, NEEDS_REDEPLOY_DOC, ProjectIdParam, RedeployChanges } from "./schema";
import { findProject } from "./store";

const AUTO_ROLLBACK_DOC =
  "Self-hosted: when the current deployment's app crashes more often than the restart policy allows (5 times in 10 minutes) and is stopped, the previous ready deployment of this environment is promoted (its kept build, its pinned configuration), said in a `system` line and in the `service.crashed` notification. Default: on for production, off for previews.";

export const EnvironmentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    kind: z.enum(ENVIRONMENT_KINDS),
    branch: z.string().nullable().openapi({ description: "Preview branch; null for production (it follows the project's gitBranch)" }),
    autoRollback: z.boolean().openapi({ description: AUTO_ROLLBACK_DOC }),
    needsRedeploy: z.boolean().openapi({ description: NEEDS_REDEPLOY_DOC("its current deployment") }),
    changes: RedeployChanges.openapi({ description: CHANGES_DOC("of this environment") }),
    createdAt: z.string(),
  })
  .openapi("Environment");

const view = (e: EnvironmentRow, redeploy: RedeployState) => ({
  id: e.id,
  name: e.name,
  kind: e.kind,
  branch: e.branch,
  autoRollback: autoRollbackOf(e),
  needsRedeploy: redeploy.needsRedeploy,
  changes: redeploy.changes,
  createdAt: e.createdAt.toISOString(),
});

const list = defineRoute({
  method: "get",
  path: "/projects/{id}/environments",
  tags: ["Projects"],
  summary: "List the project's environments (production and previews)",
  description: `Creation order, so production comes first; \`limit\` 1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}.`,
  permission: "project:read",
  request: { params: ProjectIdParam, query: PageQuery },
  responses: { 200: jsonResponse(pageOf(EnvironmentSchema, "EnvironmentPage"), "One page of environments") },
});

const create = defineRoute({
  method: "post",
  path: "/projects/{id}/environments",
  tags: ["Projects"],
  summary: "Create a preview environment",
  description:
    "`name`: 1-32 lower-case letters, digits and `-` (it becomes part of preview hostnames), unique in the project (`production` is taken): a repeat is 409. `branch`: a valid git branch name.",
  permission: "project:write",
  request: {
    params: ProjectIdParam,
    body: jsonRequest(
      z.strictObject({ name: EnvironmentName, branch: BranchName, autoRollback: z.boolean().optional().openapi({ description: AUTO_ROLLBACK_DOC }) }),
    ),
  },
  responses: { 201: jsonResponse(EnvironmentSchema, "The new preview environment"), 409: { description: "The name is taken in this project" } },
});

const update = defineRoute({
  method: "patch",
  path: "/projects/{id}/environments/{name}",
  tags: ["Projects"],
  summary: "Change an environment's settings",
  description: "`autoRollback`: see the Environment's field. An environment the project does not have: 404.",
  permission: "project:write",
  request: {
    params: ProjectIdParam.extend({ name: EnvironmentName }),
    body: jsonRequest(z.strictObject({ autoRollback: z.boolean().openapi({ description: AUTO_ROLLBACK_DOC }) })),
  },
  responses: { 200: jsonResponse(EnvironmentSchema, "The environment as changed") },
});

export const environmentsRouter = createRouter()
  .openapi(list, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const project = await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    const page = toPage(await listEnvironments(c.get("db"), project.id, limit, cursor), limit, (e) => e.id);
    const states = await redeployStates(c.get("db"), [project]);
    return c.json({ items: page.items.map((e) => view(e, states.get(e.id) ?? UP_TO_DATE)), nextCursor: page.nextCursor }, 200);
  })
  .openapi(create, async (c) => {
    const { name, branch, autoRollback } = c.req.valid("json");
    const row = await createPreviewEnvironment(c.get("db"), callerOf(c).orgId, c.req.valid("param").id, name, branch, autoRollback);
    if (!row) throw new ApiError("conflict", `The project already has an environment named '${name}'`);
    return c.json(view(row, UP_TO_DATE), 201);
  })
  .openapi(update, async (c) => {
    const { id, name } = c.req.valid("param");
    const row = await setAutoRollback(c.get("db"), callerOf(c).orgId, id, name, c.req.valid("json").autoRollback);
    if (!row) throw notFound("Environment");
    const states = await redeployStates(c.get("db"), [await findProject(c.get("db"), callerOf(c).orgId, id)]);
    return c.json(view(row, states.get(row.id) ?? UP_TO_DATE), 200);
  });
