/**
 * POST /api/deployments/build/access: the folder-upload flow's last step (after
 * session → upload → scan → ensure). Queues an upload deployment of the ensured
 * project from the session's tarball, copied to the deployment's own durable
 * artifact, and hands back a read-only deployment session for following its build.
 */
import { z } from "@hono/zod-openapi";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { DeploymentSessionSchema, openDeploymentSession } from "../projects/deployment-session";
import { findSession } from "../projects/folder/store";
import { EnvironmentName } from "../projects/schema";
import { findProject } from "../projects/store";
import { queuedView } from "./routes";
import { STORAGE_CAPS_DESCRIPTION } from "./artifacts";
import { disabledConflict, environmentFor, queueUpload } from "./queue";
import { DeploymentSchema } from "./schema";

const Id = z.string().min(1).max(100);

const Body = z
  .strictObject({
    projectId: Id.openapi({ description: "The project the ensure of this upload created or updated (`prj_…`)" }),
    uploadSessionId: Id.openapi({ description: "The scanned upload session an ensure of that project used (`ups_…`)" }),
    environment: EnvironmentName.optional().openapi({ description: "Omitted: the production environment" }),
  })
  .openapi("BuildAccessRequest");

const Answer = z
  .object({
    deployment: DeploymentSchema,
    session: DeploymentSessionSchema.openapi({
      description:
        "A read-only deployment session (`wsd_…`) of the project, for following the build: GET /api/deployments/{id} and its logs routes (`logs`, `logs/stream`)",
    }),
  })
  .openapi("BuildAccess");

const route = defineRoute({
  method: "post",
  path: "/deployments/build/access",
  tags: ["Deployments"],
  summary: "Queue the build of an uploaded folder (the folder-upload flow's last step)",
  description: [
    "After session, upload, scan and ensure: queues an `upload` deployment of `projectId` (environment omitted: production) from the session's tarball.",
    "The tarball is copied inside the upload store to the deployment's own durable artifact (`artifacts/<orgId>/<deploymentId>.tar.gz`): the session may expire and be swept, the deployment keeps its source.",
    "The project's compose services (the ensure's) go with it, else the ones the session's scan parsed; their values are stored encrypted for the deployment and never returned.",
    "404 for a session (or project) that is not the caller organization's, or has expired; 400 naming `uploadSessionId` when the session was not scanned or no ensure of this project used it; 400 naming `environment` for an unknown environment; 409 when the project is disabled or the upload is no longer stored.",
    STORAGE_CAPS_DESCRIPTION,
    "Answers 201 with the `queued` deployment and a read-only deployment session token (as POST /api/projects/{id}/deployment-session mints) for following its build.",
  ].join(" "),
  permission: "project:write",
  request: { body: jsonRequest(Body) },
  responses: {
    201: jsonResponse(Answer, "The queued deployment and a session for following it"),
    409: { description: "The project is disabled, its upload is gone, or the organization's storage is at a cap" },
  },
});

export const buildAccessRouter = createRouter().openapi(route, async (c) => {
  const caller = callerOf(c);
  const body = c.req.valid("json");
  const db = c.get("db");
  const now = c.get("clock")();
  const project = await findProject(db, caller.orgId, body.projectId);
  const session = await findSession(db, caller.orgId, body.uploadSessionId, now);
  if (!session.scannedAt) {
    throw badRequest("uploadSessionId", "This upload has not been scanned: call POST /api/projects/folder/scan/{sessionId}, then POST /api/projects/ensure");
  }
  if (session.projectId !== project.id) {
    throw badRequest(
      "uploadSessionId",
      session.projectId
        ? "This upload session was used by an ensure of another project"
        : "No ensure has used this upload session yet: call POST /api/projects/ensure with it first",
    );
  }
  if (project.disabledAt) throw disabledConflict();
  const env = await environmentFor(c, project, body.environment);
  const row = await queueUpload(c, { orgId: caller.orgId, userId: caller.userId, project, env, session });
  const deployment = await queuedView(c, caller.orgId, row.id);
  return c.json({ deployment, session: await openDeploymentSession(c, project.id) }, 201);
});
