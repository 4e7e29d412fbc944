/** GET /api/projects/:id/info: runtime, build and source details, assembled from what is stored. */
import { z } from "@hono/zod-openapi";
import { DEPLOYMENT_STATUSES } from "../../shared/db/schema";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { lastDeployment, servingDeployment, type DeploymentRow } from "./deployments-store";
import { FreeRouteSchema, GitProvider, OptionsSchema, optionsView, ProjectIdParam, PROJECT_STATUSES, ResourcesSchema, resourcesView, STATUS_DOC } from "./schema";
import { findProject, freeRoute, projectView } from "./store";

const DeploymentRef = z
  .object({ id: z.string(), status: z.enum(DEPLOYMENT_STATUSES), commitSha: z.string().nullable(), createdAt: z.string(), finishedAt: z.string().nullable() })
  .openapi("DeploymentRef");

const REPO_HOSTS: Record<string, string> = { github: "github.com", gitlab: "gitlab.com", bitbucket: "bitbucket.org" };

const InfoSchema = z
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
      kind: z.enum(["git", "upload", "none"]),
      provider: GitProvider.nullable(),
      owner: z.string().nullable(),
      repo: z.string().nullable(),
      branch: z.string().nullable().openapi({ description: "null: the repository's default branch" }),
      repositoryUrl: z.string().nullable(),
      cloneToken: z.object({ hasToken: z.boolean(), setAt: z.string().nullable() }),
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

const ref = (d: DeploymentRow | undefined) =>
  d
    ? { id: d.id, status: d.status, commitSha: d.commitSha, createdAt: d.createdAt.toISOString(), finishedAt: d.finishedAt?.toISOString() ?? null }
    : null;

export const infoRouter = createRouter().openapi(route, async (c) => {
  const db = c.get("db");
  const row = await findProject(db, callerOf(c).orgId, c.req.valid("param").id);
  const view = await projectView(db, row, c.get("config"));
  const last = await lastDeployment(db, row.id);
  const serving = await servingDeployment(db, row.id);
  const options = optionsView(row.options);
  const kind: "git" | "upload" | "none" = row.gitProvider === "upload" ? "upload" : row.gitOwner && row.gitRepo ? "git" : "none";
  const host = kind === "git" && row.gitProvider ? REPO_HOSTS[row.gitProvider] : undefined;
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
        repositoryUrl: host ? `https://${host}/${row.gitOwner}/${row.gitRepo}` : null,
        cloneToken: { hasToken: Boolean(row.cloneTokenCiphertext), setAt: row.cloneTokenSetAt?.toISOString() ?? null },
      },
    },
    200,
  );
});
