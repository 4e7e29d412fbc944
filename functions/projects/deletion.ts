/**
 * Deletion: the preview counts what DELETE removes, per kind; DELETE removes exactly
 * that in one transaction, under a lock that keeps concurrent writers of the project
 * out, and answers the same counts. Afterwards every per-project route answers 404.
 */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { deleteProject, deletionCounts } from "./deletion-store";
import { ProjectIdParam } from "./schema";
import { findProject } from "./store";
import { recordAudit } from "../operations/audit/record";

const Counts = z
  .object({
    projects: z.literal(1),
    environments: z.number().int(),
    envVars: z.number().int(),
    domains: z.number().int(),
    deployments: z.number().int(),
    services: z.number().int().openapi({ description: "Compose services set by ensure" }),
    cloneTokens: z.number().int().openapi({ description: "1 when a per-project clone token is stored" }),
    deploymentSessions: z.number().int().openapi({ description: "Deployment-session tokens issued for the project, expired ones included" }),
  })
  .openapi("ProjectDeletionCounts");

export const Preview = z.object({ projectId: z.string(), removes: Counts }).openapi("ProjectDeletionPreview");

const preview = defineRoute({
  method: "get",
  path: "/projects/{id}/deletion-preview",
  tags: ["Projects"],
  summary: "What deleting the project would remove (counts per kind)",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(Preview, "The counts DELETE would remove now") },
});

const remove = defineRoute({
  method: "delete",
  path: "/projects/{id}",
  tags: ["Projects"],
  summary: "Delete the project and everything it owns",
  description:
    "Removes, in one transaction, exactly what the deletion preview lists: the project, its environments, env vars, custom domains (released for other projects), deployment records, clone token and deployment-session tokens. The slug is released. Afterwards every per-project route answers 404.",
  permission: "project:admin",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(Preview, "What was removed") },
});

export const deletionRouter = createRouter()
  .openapi(preview, async (c) => {
    const project = await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    return c.json({ projectId: project.id, removes: await deletionCounts(c.get("db"), project) }, 200);
  })
  .openapi(remove, async (c) => {
    const { orgId } = callerOf(c);
    const { id } = c.req.valid("param");
    const { removes, artifactKeys } = await deleteProject(c.get("db"), orgId, id);
    // Its deployment-session tokens are gone: forget cached lookups at once (rare, so all of them).
    c.get("services").authCache?.invalidate();
    // Its upload deployments' tarballs go too; a failure leaves an orphan object, never a half-deleted project.
    const uploads = c.get("services").uploads;
    for (const key of uploads ? artifactKeys : []) {
      await uploads!.remove(key).catch((error) => c.get("logger").error("artifact_remove_failed", { projectId: id, error: (error as Error).message }));
    }
    await recordAudit(c, { action: "project.deleted", target: { kind: "project", id } });
    return c.json({ projectId: id, removes }, 200);
  });
