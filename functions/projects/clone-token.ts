/**
 * The per-project git clone token: encrypted at rest, bound to its project, never
 * returned. Reads show only whether one is stored and since when.
 */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { withAudit } from "../operations/audit/record";
import { noControl, ProjectIdParam } from "./schema";
import { findProject, updateProject, type ProjectRow } from "./store";

export const CloneTokenState = z
  .object({ hasToken: z.boolean(), setAt: z.string().nullable() })
  .openapi("ProjectCloneToken", { description: "The token itself is encrypted at rest and never returned" });

const cloneTokenContext = (p: { orgId: string; id: string }) => ({ orgId: p.orgId, table: "projects", column: "clone_token", rowId: p.id });

const view = (row: Pick<ProjectRow, "cloneTokenCiphertext" | "cloneTokenSetAt">) => ({
  hasToken: Boolean(row.cloneTokenCiphertext),
  setAt: row.cloneTokenSetAt?.toISOString() ?? null,
});

const read = defineRoute({
  method: "get",
  path: "/projects/{id}/clone-token",
  tags: ["Projects"],
  summary: "Whether the project has its own git clone token",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(CloneTokenState, "The token's state (never the token)") },
});

const write = defineRoute({
  method: "patch",
  path: "/projects/{id}/clone-token",
  tags: ["Projects"],
  summary: "Set, replace or clear the project's git clone token",
  description:
    "`token`: the credential (1-4096 characters) or null to clear it. It is encrypted at rest and never returned; the response is the same state as GET.",
  permission: "project:admin",
  request: {
    params: ProjectIdParam,
    body: jsonRequest(
      z.strictObject({
        token: z.string().min(1).max(4096).regex(noControl, "must not contain control characters").nullable().openapi({ description: "null clears it" }),
      }),
    ),
  },
  responses: { 200: jsonResponse(CloneTokenState, "The token's state") },
});

export const cloneTokenRouter = createRouter()
  .openapi(read, async (c) => c.json(view(await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id)), 200))
  .openapi(write, async (c) => {
    const { orgId } = callerOf(c);
    const { id } = c.req.valid("param");
    const { token } = c.req.valid("json");
    const now = c.get("clock")();
    // Only the caller's own project is ever encrypted for: the ciphertext is bound to (org, id).
    const project = await findProject(c.get("db"), orgId, id);
    const ciphertext = token === null ? null : await c.get("keyring").encrypt(token, cloneTokenContext(project));
    const row = await withAudit(
      c,
      (tx) => updateProject(tx, orgId, project.id, { cloneTokenCiphertext: ciphertext, cloneTokenSetAt: ciphertext ? now : null, updatedAt: now }),
      () => ({ action: "clone_token.changed", target: { kind: "project", id: project.id }, details: { set: token !== null } }),
    );
    return c.json(view(row), 200);
  });
