/**
 * Resolves a bearer token to a caller in one query: the token, its user, and the
 * user's membership in the active organization (the header's, else the default).
 * A deployment-session token is pinned to its project's organization: a header
 * naming another organization is refused like a non-member's.
 */
import { and, eq, sql } from "drizzle-orm";
import { apiTokens, memberships, users } from "../db/schema";
import type { Db } from "../db/types";
import type { Caller } from "../http/context";
import { effectiveTags } from "./permissions";
import { hashToken } from "./tokens";

export type AuthResult =
  | { ok: true; caller: Caller }
  | { ok: false; reason: "invalid" | "not_member" };

export async function authenticate(db: Db, token: string, orgHeader: string | undefined, now: Date): Promise<AuthResult> {
  const hash = await hashToken(token);
  const requestedOrg = orgHeader ? sql`${orgHeader}` : users.defaultOrgId;
  const activeOrg = sql`coalesce(${apiTokens.orgId}, ${requestedOrg})`;
  const [row] = await db
    .select({
      tokenId: apiTokens.id,
      userId: apiTokens.userId,
      scopes: apiTokens.scopes,
      expiresAt: apiTokens.expiresAt,
      revokedAt: apiTokens.revokedAt,
      kind: apiTokens.kind,
      projectId: apiTokens.projectId,
      tokenOrg: apiTokens.orgId,
      memberOrg: memberships.orgId,
      role: memberships.role,
    })
    .from(apiTokens)
    .innerJoin(users, eq(users.id, apiTokens.userId))
    .leftJoin(memberships, and(eq(memberships.userId, apiTokens.userId), eq(memberships.orgId, activeOrg)))
    .where(eq(apiTokens.tokenHash, hash))
    .limit(1);
  if (!row || row.revokedAt || (row.expiresAt && row.expiresAt <= now)) return { ok: false, reason: "invalid" };
  const session = row.kind === "deployment_session";
  if (session && (!row.projectId || !row.tokenOrg)) return { ok: false, reason: "invalid" };
  if (orgHeader && (!row.memberOrg || (row.tokenOrg && row.tokenOrg !== orgHeader))) return { ok: false, reason: "not_member" };
  return {
    ok: true,
    caller: {
      userId: row.userId,
      tokenId: row.tokenId,
      scopes: row.scopes,
      orgId: row.memberOrg,
      role: row.role,
      tags: row.role ? effectiveTags(row.role, row.scopes) : [],
      ...(session ? { sessionProjectId: row.projectId! } : {}),
    },
  };
}
