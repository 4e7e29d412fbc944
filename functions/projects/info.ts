/** GET /api/projects/:id/info: runtime, build and source details, assembled from what is stored; GET /api/projects/:id/services: its compose services, values masked. */
import { z } from "@hono/zod-openapi";
import { DEPLOYMENT_STATUSES } from "../../shared/db/schema";
import { cloneUrl, isGitProvider } from "../../shared/git/hosts";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { lastDeployment, servingDeployment, type DeploymentRow } from "./deployments-store";
import { listServices } from "./folder/ensure-store";
import { ServiceSchema } from "./folder/schema";
import {
  FreeRouteSchema,
  GitProvider,
  OptionsSchema,
  optionsView,
  ProjectIdParam,
  PROJECT_STATUSES,
  ResourcesSchema,
  resourcesView,
  SOURCE_KINDS,
  STATUS_DOC,
} from "./schema";
import { findProject, freeRoute, projectView, sourceView } from "./store";

const DeploymentRef = z
  .object({ id: z.string(), status: z.enum(DEPLOYMENT_STATUSES), commitSha: z.string().nullable(), createdAt: z.string(), finishedAt: z.string().nullable() })
  .openapi("DeploymentRef");

export const InfoSchema = z
  .object({
    id: z.string(),
    runtime: z.object({
      status: z.enum(PROJECT_STATUSES).openapi({ description: STATUS_DOC }),
      resources: ResourcesSchema,
      freeRoute: FreeRouteSchema,
      primaryDomain: z.string().nullable(),
      runtimeVersion: z.string().nullable(),
      startCommand: z.string().nullable(),
      serving: DeploymentRef.nullable().openapi({ description: "The newest ready production deployment" }),
    }),
    build: z.object({
      framework: z.string(),
      options: OptionsSchema,
      lastDeployment: DeploymentRef.nullable(),
    }),
    source: z.object({
      kind: z.enum(SOURCE_KINDS).openapi({ description: "As the project's `source.kind` (GET /api/projects/{id})" }),
      provider: GitProvider.nullable(),
      owner: z.string().nullable(),
      repo: z.string().nullable(),
      branch: z.string().nullable().openapi({ description: "The deploy branch as stored; null: the repository's default branch" }),
      defaultBranch: z.string().nullable().openapi({ description: "The repository's default branch as last seen on the host (git/link, branch)" }),
      repositoryUrl: z
        .string()
        .nullable()
        .openapi({ description: "`<provider base URL>/<owner>/<repo>`; null when this instance has no host for the provider" }),
      cloneUrl: z.string().nullable().openapi({ description: "The same with `.git`, never with credentials" }),
      linkedAt: z.string().nullable().openapi({ description: "When git/link checked and linked the repository; null when only named by PATCH" }),
      autoDeploy: z.boolean(),
      cloneToken: z.object({ hasToken: z.boolean(), setAt: z.string().nullable() }),
      localPath: z.string().nullable().openapi({ description: "The folder's real path when `kind` is `local`; null otherwise" }),
    }),
  })
  .openapi("ProjectInfo");

const route = defineRoute({
  method: "get",
  path: "/projects/{id}/info",
  tags: ["Projects"],
  summary: "Detailed runtime, build and source information",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(InfoSchema, "Runtime, build and source details") },
});

const services = defineRoute({
  method: "get",
  path: "/projects/{id}/services",
  tags: ["Projects"],
  summary: "The project's compose services, values masked",
  description:
    "The service set the last ensure stored for a compose folder (`wsp deploy`, POST /api/projects/ensure with `services`), in its order: image, build context, command, ports, dependencies and environment keys, every value masked (`••••••••`; values are never returned). An empty list for a project without services. Each deployment records the services it was deployed with (GET /api/deployments/{id}, `services`).",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: {
    200: jsonResponse(z.object({ items: z.array(ServiceSchema) }).openapi("ProjectServices"), "The project's services, values masked"),
  },
});

const ref = (d: DeploymentRow | undefined) =>
  d ? { id: d.id, status: d.status, commitSha: d.commitSha, createdAt: d.createdAt.toISOString(), finishedAt: d.finishedAt?.toISOString() ?? null } : null;

export const infoRouter = createRouter()
  .openapi(services, async (c) => {
    const row = await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    return c.json({ items: await listServices(c.get("db"), row.id) }, 200);
  })
  .openapi(route, async (c) => {
    const db = c.get("db");
    const row = await findProject(db, callerOf(c).orgId, c.req.valid("param").id);
    const view = await projectView(db, row, c.get("config"));
    const last = await lastDeployment(db, row.id);
    const serving = await servingDeployment(db, row.id);
    const options = optionsView(row.options);
    const { kind, localPath } = sourceView(row);
    const clone = kind === "git" && isGitProvider(row.gitProvider) ? cloneUrl(row.gitProvider, row.gitOwner!, row.gitRepo!, c.get("services").git.hosts) : null;
    return c.json(
      {
        id: row.id,
        runtime: {
          status: view.status,
          resources: resourcesView(row),
          freeRoute: freeRoute(row, c.get("config")),
          primaryDomain: view.routes.domains.find((d) => d.primary)?.hostname ?? null,
          runtimeVersion: options.runtimeVersion,
          startCommand: options.startCommand,
          serving: ref(serving),
        },
        build: { framework: row.framework, options, lastDeployment: ref(last) },
        source: {
          kind,
          provider: row.gitProvider,
          owner: row.gitOwner,
          repo: row.gitRepo,
          branch: row.gitBranch,
          defaultBranch: row.gitDefaultBranch,
          repositoryUrl: clone ? clone.slice(0, -".git".length) : null,
          cloneUrl: clone,
          linkedAt: row.gitLinkedAt?.toISOString() ?? null,
          autoDeploy: row.autoDeploy,
          cloneToken: { hasToken: Boolean(row.cloneTokenCiphertext), setAt: row.cloneTokenSetAt?.toISOString() ?? null },
          localPath,
        },
      },
      200,
    );
  });
