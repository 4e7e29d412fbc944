/**
 * The deployment session: a short-lived, read-only token (`wsd_…`) for one
 * project's deployments. Minted by POST /api/projects/{id}/deployment-session and
 * by POST /api/deployments/build/access (the folder-upload flow's last step).
 */
import { z } from "@hono/zod-openapi";
import { SESSION_TOKEN_PREFIX, displayPrefix, generateToken, hashToken } from "../../shared/auth/tokens";
import { capToParent } from "../../shared/auth/token-lifetime";
import type { AppContext } from "../../shared/http/context";
import { callerOf } from "../../shared/http/router";
import { createDeploymentSession } from "./deployments-store";

export const DEPLOYMENT_SESSION_TTL_MS = 15 * 60 * 1000;
/** What a session may do, within what its creator may do. */
export const SESSION_TAGS = ["project:read", "project:deployment:list"] as const;

export const DeploymentSessionSchema = z
  .object({
    token: z.string().openapi({ description: "Shown only in this response" }),
    projectId: z.string(),
    expiresAt: z.string(),
    scopes: z.array(z.enum(SESSION_TAGS)),
  })
  .openapi("DeploymentSession");

export type DeploymentSession = z.infer<typeof DeploymentSessionSchema>;

/**
 * Mints a session token for the caller's project `projectId` (404 when it is not
 * the caller's): 15 minutes, never past the calling token's own expiry, its
 * permissions narrowed to the caller's own.
 */
export async function openDeploymentSession(c: AppContext, projectId: string): Promise<DeploymentSession> {
  const caller = callerOf(c);
  const token = generateToken(SESSION_TOKEN_PREFIX);
  const expiresAt = await capToParent(c.get("db"), caller.tokenId, new Date(c.get("clock")().getTime() + DEPLOYMENT_SESSION_TTL_MS));
  const scopes = SESSION_TAGS.filter((t) => caller.tags.includes(t));
  const id = await createDeploymentSession(c.get("db"), projectId, {
    orgId: caller.orgId,
    userId: caller.userId,
    tokenHash: hashToken(token),
    displayPrefix: displayPrefix(token),
    scopes,
    expiresAt,
    parentId: caller.tokenId,
  });
  return { token, projectId: id, expiresAt: expiresAt.toISOString(), scopes };
}
