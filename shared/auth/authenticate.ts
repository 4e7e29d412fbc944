/**
 * Resolves a bearer token to a caller in one query: the token, its user, and the
 * user's membership in the active organization (the header's, else the default).
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
  const activeOrg = orgHeader ? sql`${orgHeader}` : users.defaultOrgId;
  const [row] = await db
    .select({
      tokenId: apiTokens.id,
      userId: apiTokens.userId,
      scopes: apiTokens.scopes,
      expiresAt: apiTokens.expiresAt,
      revokedAt: apiTokens.revokedAt,
      memberOrg: memberships.orgId,
      role: memberships.role,
    })
    .from(apiTokens)
    .innerJoin(users, eq(users.id, apiTokens.userId))
    .leftJoin(memberships, and(eq(memberships.userId, apiTokens.userId), eq(memberships.orgId, activeOrg)))
    .where(eq(apiTokens.tokenHash, hash))
    .limit(1);
  if (!row || row.revokedAt || (row.expiresAt && row.expiresAt <= now)) return { ok: false, reason: "invalid" };
  if (orgHeader && !row.memberOrg) return { ok: false, reason: "not_member" };
  return {
    ok: true,
    caller: {
      userId: row.userId,
      tokenId: row.tokenId,
      scopes: row.scopes,
      orgId: row.memberOrg,
      role: row.role,
      tags: row.role ? effectiveTags(row.role, row.scopes) : [],
    },
  };
}
