/**
 * POST /api/projects/ensure: create or update the project carrying a folder
 * upload's build configuration (the step after the scan). See ensure-store.ts.
 */
import { defineRoute, jsonRequest, jsonResponse } from "../../../shared/http/route";
import { callerOf, createRouter } from "../../../shared/http/router";
import { ENSURED_TTL_MS } from "../../../shared/storage/limits";
import { EnsureBody, EnsuredProjectSchema } from "./ensure-schema";
import { ensureProject } from "./ensure-store";
import { STATUS_DOC } from "../schema";
import { configReservedSlugs } from "../slug";
import { projectView } from "../store";

const route = defineRoute({
  method: "post",
  path: "/projects/ensure",
  tags: ["Projects", "Folder upload"],
  summary: "Create or update the project carrying build config (folder-upload step)",
  description: [
    "The full create body, plus: `projectId` (update that project in place; fields left out keep their values), `uploadSessionId` (a scanned folder-upload session), " +
      "`services` (the whole service set), and the scan's `installCommand`, `startCommand`, `outputDirectory`. `gitProvider: upload` marks a folder-upload project; " +
      "with `uploadSessionId` it is the default.",
    "`services` given become the project's service set: services left out are removed. Compose values sent masked (a run of `•`) are restored from the values the scan " +
      "captured when `uploadSessionId` is sent, and dropped otherwise; they are never stored as bullets. Values sent in the clear are stored as sent. " +
      "Environment values are stored encrypted and always read back masked. `services` omitted: the project's services are unchanged and the deploy step falls back to the services parsed for the session.",
    "An `uploadSessionId` already used by an ensure updates the same project again (a retry creates no duplicate); naming a different `projectId` for it is 409. " +
      `The session (and its upload) is kept ${ENSURED_TTL_MS / 60_000} minutes after the ensure for the deploy step. The session must have been scanned (else 400).`,
    `One transaction: on any error nothing is changed. 201 when a project was created, 200 when one was updated. The body may be up to 8 MiB (services with their environment); larger: 413. ${STATUS_DOC}`,
  ].join("\n\n"),
  permission: "project:write",
  // A compose project's services carry their environment values: more than the default 1 MiB.
  bodyLimit: 8 * 1024 * 1024,
  request: { body: jsonRequest(EnsureBody) },
  responses: {
    200: jsonResponse(EnsuredProjectSchema, "The updated project and its services"),
    201: jsonResponse(EnsuredProjectSchema, "The created project and its services"),
    409: { description: "The upload session was already used for another project" },
  },
});

export const ensureRouter = createRouter().openapi(route, async (c) => {
  const ensured = await ensureProject(
    c.get("db"),
    c.get("keyring"),
    callerOf(c).orgId,
    c.req.valid("json"),
    c.get("clock")(),
    configReservedSlugs(c.get("config")),
  );
  const view = await projectView(c.get("db"), ensured.row, c.get("config"));
  const body = { ...view, services: ensured.services, uploadSessionId: ensured.uploadSessionId };
  return ensured.created ? c.json(body, 201) : c.json(body, 200);
});
