/**
 * SQL of cookie sessions: open, look up (with the user's membership in the
 * active organization, read on every request, so a demotion or removal holds
 * at once), refresh, list and end.
 */
import { and, asc, eq, gt, isNull, lt, or, sql, type SQL } from "drizzle-orm";
import { apiTokens, memberships, sessions, users } from "../db/schema";
import type { Executor } from "../db/types";
import { newId } from "../ids";
import { SESSION_IDLE_MS, SESSION_TOUCH_MS } from "./session";
import { hashToken } from "./tokens";

export type SessionRow = typeof sessions.$inferSelect;

export async function openSession(
  ex: Executor,
  input: { userId: string; secret: string; tokenId: string | null; userAgent: string | null; expiresAt: Date; now: Date },
): Promise<SessionRow> {
  const [row] = await ex
    .insert(sessions)
    .values({
      id: newId("ses", input.now.getTime()),
      userId: input.userId,
      secretHash: hashToken(input.secret),
      tokenId: input.tokenId,
      userAgent: input.userAgent,
      lastSeenAt: input.now,
      expiresAt: input.expiresAt,
      createdAt: input.now,
    })
    .returning();
  return row!;
}

export interface SessionAuthRow {
  sessionId: string;
  userId: string;
  tokenId: string | null;
  lastSeenAt: Date;
  expiresAt: Date;
  tokenRevokedAt: Date | null;
  tokenExpiresAt: Date | null;
  memberOrg: string | null;
  role: "owner" | "admin" | "member" | "viewer" | null;
}

/** The session of a cookie value with the user's membership in the active organization (the header's, else the default). */
export async function findSessionForAuth(ex: Executor, secret: string, orgHeader: string | undefined): Promise<SessionAuthRow | undefined> {
  const activeOrg: SQL = orgHeader ? sql`${orgHeader}::text` : sql`${users.defaultOrgId}`;
  const [row] = await ex
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
    })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .leftJoin(apiTokens, eq(apiTokens.id, sessions.tokenId))
    .leftJoin(memberships, and(eq(memberships.userId, sessions.userId), eq(memberships.orgId, activeOrg)))
    .where(eq(sessions.secretHash, hashToken(secret)))
    .limit(1);
  return row;
}

/** Whether the session is still open at `now` (absolute and idle expiry, and the token it was opened with). */
export function sessionIsLive(row: Pick<SessionAuthRow, "expiresAt" | "lastSeenAt" | "tokenId" | "tokenRevokedAt" | "tokenExpiresAt">, now: Date): boolean {
  if (row.expiresAt <= now) return false;
  if (row.lastSeenAt.getTime() + SESSION_IDLE_MS <= now.getTime()) return false;
  if (row.tokenId && (row.tokenRevokedAt || (row.tokenExpiresAt && row.tokenExpiresAt <= now))) return false;
  return true;
}

/** Refreshes last-seen (the idle expiry) when it is older than a minute: one write a minute at most, not one per request. */
export async function touchSession(ex: Executor, row: SessionAuthRow, now: Date): Promise<void> {
  if (now.getTime() - row.lastSeenAt.getTime() < SESSION_TOUCH_MS) return;
  await ex
    .update(sessions)
    .set({ lastSeenAt: now })
    .where(and(eq(sessions.id, row.sessionId), lt(sessions.lastSeenAt, new Date(now.getTime() - SESSION_TOUCH_MS))));
}

/** The user's live sessions, oldest first (expired ones are not listed). */
export async function listSessions(ex: Executor, userId: string, now: Date): Promise<SessionRow[]> {
  const idleSince = new Date(now.getTime() - SESSION_IDLE_MS);
  return ex
    .select({ ...sessionColumns })
    .from(sessions)
    .leftJoin(apiTokens, eq(apiTokens.id, sessions.tokenId))
    .where(
      and(
        eq(sessions.userId, userId),
        gt(sessions.expiresAt, now),
        gt(sessions.lastSeenAt, idleSince),
        or(isNull(sessions.tokenId), and(isNull(apiTokens.revokedAt), or(isNull(apiTokens.expiresAt), gt(apiTokens.expiresAt, now)))),
      ),
    )
    .orderBy(asc(sessions.id))
    .limit(200);
}

const sessionColumns = {
  id: sessions.id,
  userId: sessions.userId,
  secretHash: sessions.secretHash,
  tokenId: sessions.tokenId,
  userAgent: sessions.userAgent,
  lastSeenAt: sessions.lastSeenAt,
  expiresAt: sessions.expiresAt,
  createdAt: sessions.createdAt,
};

/** Ends one of the user's sessions; false when the id is not one of theirs. */
export async function endSession(ex: Executor, userId: string, sessionId: string): Promise<boolean> {
  const gone = await ex
    .delete(sessions)
    .where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId)))
    .returning({ id: sessions.id });
  return gone.length > 0;
}

/** Deletes sessions past their absolute or idle expiry (at most `limit`); called now and then by sign-in. */
export async function pruneSessions(ex: Executor, now: Date, limit = 100): Promise<void> {
  const idleSince = new Date(now.getTime() - SESSION_IDLE_MS);
  const due = ex
    .select({ id: sessions.id })
    .from(sessions)
    .where(or(lt(sessions.expiresAt, now), lt(sessions.lastSeenAt, idleSince)))
    .limit(limit);
  await ex.delete(sessions).where(sql`${sessions.id} in (${due})`);
}
