/**
 * POST /api/projects/{id}/export: the project's whole configuration with its
 * secret values in the clear, for moving it to another instance (the transfer
 * routes, functions/cloud/, call it on the cloud). The one route that returns
 * secrets: `project:admin` only, `Cache-Control: no-store`, and the values are
 * never logged (the request line carries no body).
 */
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import type { AppContext } from "../../shared/http/context";
import { type ProjectExport, ProjectExportSchema } from "./export-schema";
import { readProjectExport } from "./export-store";
import { ProjectIdParam } from "./schema";

/** How long the artifact's presigned GET stays valid: enough for the receiver to start its download. */
export const ARTIFACT_LINK_SECONDS = 15 * 60;

const exportProject = defineRoute({
  method: "post",
  path: "/projects/{id}/export",
  tags: ["Projects"],
  summary: "Export the project's configuration, secret values in the clear (for a transfer)",
  description: [
    "This is the one route that returns secret values in the clear: every env var of every environment (secrets decrypted), the clone token and the compose services' values, with the git link, options, resources, domains (the primary last) and the source. It exists to move a project to another instance: the transfer routes (`/api/projects/{id}/transfer/...`) call it on the side the project leaves.",
    "`project:admin` only (owners and admins; a token must carry that scope). The answer is sent with `Cache-Control: no-store`, and the values are never logged. Nothing changes on the project: POST only because the answer is not a read to cache or prefetch.",
    `\`source.artifact\`: for an upload project whose upload store is object storage (S3, the cloud), a presigned GET of the latest uploaded tarball (the one a redeploy would take), valid ${ARTIFACT_LINK_SECONDS / 60} minutes, fetched without a token. Null for other sources, when no tarball is stored, and on a self-hosted instance that relays uploads to its disk (no URL can be handed out there; the transfer reads the tarball from the store itself).`,
  ].join("\n\n"),
  permission: "project:admin",
  request: { params: ProjectIdParam },
  responses: {
    200: {
      ...jsonResponse(ProjectExportSchema, "The transfer bundle"),
      headers: { "Cache-Control": { description: "Always `no-store`", schema: { type: "string" } } },
    },
  },
});

/** A presigned GET of the latest tarball, when the store can hand one out. */
async function artifactOf(c: AppContext, key: string | null): Promise<ProjectExport["source"]["artifact"]> {
  const uploads = c.get("services").uploads;
  if (!key || uploads?.kind !== "presigned") return null;
  const link = await uploads.presignGet({ key, now: c.get("clock")(), expiresInSeconds: ARTIFACT_LINK_SECONDS });
  return link && { url: link.url, sizeBytes: link.sizeBytes, expiresAt: link.expiresAt.toISOString() };
}

export const exportRouter = createRouter().openapi(exportProject, async (c) => {
  const { orgId } = callerOf(c);
  const { latestArtifactKey, source, ...bundle } = await readProjectExport(c.get("db"), c.get("keyring"), orgId, c.req.valid("param").id, c.get("clock")());
  const body: ProjectExport = { ...bundle, source: { kind: source.kind, artifact: await artifactOf(c, latestArtifactKey) } };
  c.header("Cache-Control", "no-store");
  return c.json(body, 200);
});
