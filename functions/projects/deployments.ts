/**
 * The project's deployment history (written by the deployments API) and the
 * deployment session: a short-lived read-only token for one project's deployments.
 */
import { z } from "@hono/zod-openapi";
import { DEPLOYMENT_STATUSES } from "../../shared/db/schema";
import { DeploymentSchema, deploymentView } from "../deployments/schema";
import { currentWaiting } from "../deployments/placement-store";
import { transitionsOf } from "../deployments/store";
import { DEFAULT_LIMIT, MAX_LIMIT, pageOf, toPage, PageQuery } from "../../shared/http/pagination";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { listDeployments } from "./deployments-store";
import { DeploymentSessionSchema, openDeploymentSession } from "./deployment-session";
import { findEnvironment } from "./environments-store";
import { EnvironmentName, ProjectIdParam } from "./schema";
import { findProject } from "./store";

export { DeploymentSchema };

const list = defineRoute({
  method: "get",
  path: "/projects/{id}/deployments",
  tags: ["Projects"],
  summary: "List the project's deployments, newest first",
  description: `Newest first (by id); \`limit\` 1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}; \`environment\` narrows to one environment (an unknown one: an empty page), \`status\` to one state. Each deployment shows its source, commit, \`current\`, failure reason and every transition with its time. Accepts this project's deployment-session token.`,
  permission: "project:deployment:list",
  request: {
    params: ProjectIdParam,
    query: PageQuery.extend({
      environment: EnvironmentName.optional(),
      status: z.enum(DEPLOYMENT_STATUSES).optional().openapi({ description: "Only deployments in this state" }),
    }),
  },
  responses: { 200: jsonResponse(pageOf(DeploymentSchema, "DeploymentPage"), "One page of deployments") },
});

const session = defineRoute({
  method: "post",
  path: "/projects/{id}/deployment-session",
  tags: ["Projects"],
  summary: "Open a read-only deployment/build session",
  description:
    "Returns a bearer token (`wsd_…`, shown once) valid for 15 minutes (never past the calling token's own expiry), for this project only, read-only: it is accepted by GET /api/projects/{id}/deployments, GET /api/projects/{id}/logs and …/logs/stream of this project, and GET /api/deployments/{id}, …/logs and …/logs/stream of its deployments, and refused with 403 everywhere else, other projects included. Its permissions are `project:read` and `project:deployment:list`, narrowed to the caller's own; it dies early if the caller leaves the organization or the project is deleted. No request body.",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: {
    201: jsonResponse(DeploymentSessionSchema, "The session token"),
  },
});

export const deploymentsRouter = createRouter()
  .openapi(list, async (c) => {
    const { orgId } = callerOf(c);
    const { limit, cursor, environment, status } = c.req.valid("query");
    const project = await findProject(c.get("db"), orgId, c.req.valid("param").id);
    const env = environment === undefined ? undefined : await findEnvironment(c.get("db"), project.id, environment);
    if (environment !== undefined && !env) return c.json({ items: [], nextCursor: null }, 200);
    const rows = await listDeployments(c.get("db"), project.id, { environmentId: env?.id, status }, limit, cursor);
    const page = toPage(rows, limit, (r) => r.d.id);
    const transitions = await transitionsOf(
      c.get("db"),
      page.items.map(({ d }) => d.id),
    );
    const waiting = await currentWaiting(
      c.get("db"),
      orgId,
      page.items.map(({ d }) => d),
      c.get("clock")(),
    );
    return c.json(
      {
        items: page.items.map(({ d, environment }) => deploymentView(d, environment, transitions.get(d.id)!, waiting.get(d.id)!)),
        nextCursor: page.nextCursor,
      },
      200,
    );
  })
  .openapi(session, async (c) => c.json(await openDeploymentSession(c, c.req.valid("param").id), 201));
