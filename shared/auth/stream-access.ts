/**
 * Whether the caller of an open stream may still read it. A stream outlives the
 * request that opened it (up to an hour), so it asks again every few seconds
 * (shared/http/sse.ts) with the rules the guard applied at open: the token is
 * neither revoked nor expired (a log-stream token's 60 s bound only the opening),
 * nor is the token or cookie session that minted it (a stream token minted by a
 * personal token or the console's session ends with it), or the cookie session
 * is still live; the user is still a member of the
 * organization; the role's tags ∩ the token's scopes still hold the route's
 * permission; and the project still exists. One small query by primary keys.
 */
import { and, eq, sql } from "drizzle-orm";
import { apiTokens, memberships, projects, sessions } from "../db/schema";
import type { Db } from "../db/types";
import type { Caller } from "../http/context";
import { effectiveTags, type Tag } from "./permissions";
import { sessionIsLive } from "./session-store";

/** Why a stream ended: the data of its closing `end` event. */
export interface AccessEnd {
  reason: "access revoked" | "project deleted";
  detail: string;
}

export interface StreamGrant {
  /** The route's permission, as the guard checked it at open. */
  permission: Tag;
  /** The project the stream reads. */
  projectId: string;
}

const projectExists = (orgId: string, projectId: string) =>
  sql<boolean>`exists (select 1 from ${projects} where ${projects.id} = ${projectId} and ${projects.orgId} = ${orgId})`;

const revoked = (detail: string): AccessEnd => ({ reason: "access revoked", detail });
const PROJECT_DELETED: AccessEnd = { reason: "project deleted", detail: "The project was deleted" };

function membershipEnd(role: Caller["role"], scopes: string[] | null, permission: Tag): AccessEnd | undefined {
  if (!role) return revoked("The user is no longer a member of the organization");
  if (!effectiveTags(role, scopes).includes(permission)) return revoked(`The role or token no longer holds '${permission}'`);
  return undefined;
}

async function tokenEnd(db: Db, caller: Caller, orgId: string, grant: StreamGrant, now: Date): Promise<AccessEnd | undefined> {
  const [row] = await db
    .select({
      revokedAt: apiTokens.revokedAt,
      expiresAt: apiTokens.expiresAt,
      kind: apiTokens.kind,
      scopes: apiTokens.scopes,
      parentId: apiTokens.parentId,
      role: memberships.role,
      project: projectExists(orgId, grant.projectId),
    })
    .from(apiTokens)
    .leftJoin(memberships, and(eq(memberships.userId, apiTokens.userId), eq(memberships.orgId, orgId)))
    .where(eq(apiTokens.id, caller.tokenId));
  // A project-pinned token is deleted with its project.
  if (!row) return caller.session ? PROJECT_DELETED : revoked("The token was revoked");
  if (row.revokedAt) return revoked("The token was revoked");
  if (row.kind !== "log_stream" && row.expiresAt && row.expiresAt <= now) return revoked("The token expired");
  const parent = row.parentId ? await parentEnd(db, row.parentId, now) : undefined;
  if (parent) return parent;
  return membershipEnd(row.role, row.scopes, grant.permission) ?? (row.project ? undefined : PROJECT_DELETED);
}

/** Whether the token or cookie session that minted the stream's token has ended (revoked, expired, logged out). */
async function parentEnd(db: Db, parentId: string, now: Date): Promise<AccessEnd | undefined> {
  const [token] = await db.select({ revokedAt: apiTokens.revokedAt, expiresAt: apiTokens.expiresAt }).from(apiTokens).where(eq(apiTokens.id, parentId));
  if (token) {
    if (token.revokedAt) return revoked("The token that opened the stream was revoked");
    if (token.expiresAt && token.expiresAt <= now) return revoked("The token that opened the stream expired");
    return undefined;
  }
  const [session] = await db
    .select({
      tokenId: sessions.tokenId,
      lastSeenAt: sessions.lastSeenAt,
      expiresAt: sessions.expiresAt,
      tokenRevokedAt: apiTokens.revokedAt,
      tokenExpiresAt: apiTokens.expiresAt,
    })
    .from(sessions)
    .leftJoin(apiTokens, eq(apiTokens.id, sessions.tokenId))
    .where(eq(sessions.id, parentId));
  if (!session || !sessionIsLive(session, now)) return revoked("The session that opened the stream ended");
  return undefined;
}

async function sessionEnd(db: Db, sessionId: string, orgId: string, grant: StreamGrant, now: Date): Promise<AccessEnd | undefined> {
  const [row] = await db
    .select({
      sessionId: sessions.id,
      userId: sessions.userId,
      tokenId: sessions.tokenId,
      lastSeenAt: sessions.lastSeenAt,
      expiresAt: sessions.expiresAt,
      tokenRevokedAt: apiTokens.revokedAt,
      tokenExpiresAt: apiTokens.expiresAt,
      memberOrg: memberships.orgId,
      role: memberships.role,
      project: projectExists(orgId, grant.projectId),
    })
    .from(sessions)
    .leftJoin(apiTokens, eq(apiTokens.id, sessions.tokenId))
    .leftJoin(memberships, and(eq(memberships.userId, sessions.userId), eq(memberships.orgId, orgId)))
    .where(eq(sessions.id, sessionId));
  if (!row || !sessionIsLive(row, now)) return revoked("The session ended");
  return membershipEnd(row.role, null, grant.permission) ?? (row.project ? undefined : PROJECT_DELETED);
}

/** Undefined while the caller may still read the stream; else why it ends. `sessionId`: the cookie session the caller came with. */
export async function streamAccessEnd(db: Db, caller: Caller, sessionId: string | undefined, grant: StreamGrant, now: Date): Promise<AccessEnd | undefined> {
  if (!caller.orgId) return revoked("No active organization");
  return sessionId !== undefined ? sessionEnd(db, sessionId, caller.orgId, grant, now) : tokenEnd(db, caller, caller.orgId, grant, now);
}
