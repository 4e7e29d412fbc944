/**
 * Resolves a bearer token to a caller in one query: the token, its user, and the
 * user's membership in the active organization (the header's, else the default).
 * A deployment-session token is pinned to its project's organization: a header
 * naming another organization is refused like a non-member's. A session
 * cookie (authenticateSession) resolves the same way, without scopes.
 * A runner token (`wsr_…`) resolves to its build server instead of a user
 * (RunnerCaller); the guard admits it on the runner protocol only.
 */
import { and, eq, sql, type SQL } from "drizzle-orm";
import { apiTokens, memberships, servers, type TokenKind, users } from "../db/schema";
import type { AuthCache, AuthRow } from "./auth-cache";
import { preparedStatement } from "../db/prepared";
import type { Db } from "../db/types";
import type { Caller, RunnerCaller } from "../http/context";
import { effectiveTags } from "./permissions";
import { findSessionForAuth, sessionIsLive, touchSession } from "./session-store";
import { hashToken, RUNNER_TOKEN_PREFIX } from "./tokens";

export type AuthResult = { ok: true; caller: Caller } | { ok: true; runner: RunnerCaller } | { ok: false; reason: "invalid" | "not_member" };

const columns = {
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
};

/** The lookup, for an active organization taken from the request or the user's default. */
function lookup(db: Db, requestedOrg: SQL | typeof users.defaultOrgId, name: string) {
  const activeOrg = sql`coalesce(${apiTokens.orgId}, ${requestedOrg})`;
  return db
    .select(columns)
    .from(apiTokens)
    .innerJoin(users, eq(users.id, apiTokens.userId))
    .leftJoin(memberships, and(eq(memberships.userId, apiTokens.userId), eq(memberships.orgId, activeOrg)))
    .where(eq(apiTokens.tokenHash, sql.placeholder("hash")))
    .limit(1)
    .prepare(name);
}

// Prepared once per database handle: this runs on every request.
const byHeaderOrg = preparedStatement((db) => lookup(db, sql`${sql.placeholder("org")}::text`, "auth_header_org"));
const byDefaultOrg = preparedStatement((db) => lookup(db, users.defaultOrgId, "auth_default_org"));

/** The database's answer, stored in the cache when complete and not raced by an invalidation. */
async function queryRow(db: Db, key: string, hash: string, orgHeader: string | undefined, now: Date, cache?: AuthCache): Promise<AuthRow | undefined> {
  const generation = cache?.generation ?? 0;
  const [row] = orgHeader ? await byHeaderOrg(db).execute({ hash, org: orgHeader }) : await byDefaultOrg(db).execute({ hash });
  if (cache && row?.memberOrg && !row.revokedAt) cache.set(key, row, generation, now.getTime());
  return row;
}

// Not cached: deleting a server must revoke its token on the very next request, in every process.
const serverByHash = preparedStatement((db) =>
  db
    .select({ serverId: servers.id, orgId: servers.orgId })
    .from(servers)
    .where(eq(servers.tokenHash, sql.placeholder("hash")))
    .limit(1)
    .prepare("auth_runner"),
);

/** A runner token's server; it is pinned to the server's organization like a session token to its project's. */
async function authenticateRunner(db: Db, token: string, orgHeader: string | undefined): Promise<AuthResult> {
  const [row] = await serverByHash(db).execute({ hash: hashToken(token) });
  if (!row) return { ok: false, reason: "invalid" };
  if (orgHeader && orgHeader !== row.orgId) return { ok: false, reason: "not_member" };
  return { ok: true, runner: row };
}

/**
 * The cache is keyed by the token itself, as the request carries it, with the organization asked for: hashing
 * it is only needed to ask the database. The key lives in this process's memory only, as long as the cached
 * answer (the TTL at most); a space separates the two, as no token character is one (BEARER in guard.ts).
 */
export function authenticate(db: Db, token: string, orgHeader: string | undefined, now: Date, cache?: AuthCache): AuthResult | Promise<AuthResult> {
  if (token.startsWith(RUNNER_TOKEN_PREFIX)) return authenticateRunner(db, token, orgHeader);
  const key = `${token} ${orgHeader ?? ""}`;
  // A cached answer is given as is, not as a promise: this runs on every request, and the guard goes on without yielding.
  const cached = cache?.get(key, now.getTime());
  if (cached) return cachedCaller(cached, orgHeader, now);
  return queryRow(db, key, hashToken(token), orgHeader, now, cache).then((row) => callerOf(row, orgHeader, now));
}

/**
 * A cached row's answer, built once: a cached row is a valid token of a member of the key's organization, so
 * only its expiry can change the answer. Frozen, as every request of that token shares it.
 */
const callers = new WeakMap<AuthRow, AuthResult>();
function cachedCaller(row: AuthRow, orgHeader: string | undefined, now: Date): AuthResult {
  if (row.expiresAt && row.expiresAt <= now) return { ok: false, reason: "invalid" };
  let result = callers.get(row);
  if (!result) {
    result = callerOf(row, orgHeader, now);
    if (result.ok && "caller" in result) Object.freeze(result.caller);
    callers.set(row, result);
  }
  return result;
}

function callerOf(row: AuthRow | undefined, orgHeader: string | undefined, now: Date): AuthResult {
  if (!row || row.revokedAt || (row.expiresAt && row.expiresAt <= now)) return { ok: false, reason: "invalid" };
  const session = row.kind !== "personal";
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
      ...(session ? { session: { kind: row.kind as Exclude<TokenKind, "personal">, projectId: row.projectId! } } : {}),
    },
  };
}

export type SessionAuthResult = { ok: true; caller: Caller; sessionId: string } | { ok: false; reason: "invalid" | "not_member" };

/**
 * Resolves a session cookie to a caller: like a personal token of the user without
 * scopes (every tag of the user's role in the active organization, read on every
 * request, so a demotion or removal holds at once). Not cached: the lookup is one
 * query, and last-seen is written at most once a minute.
 */
export async function authenticateSession(db: Db, secret: string, orgHeader: string | undefined, now: Date): Promise<SessionAuthResult> {
  const row = await findSessionForAuth(db, secret, orgHeader);
  if (!row || !sessionIsLive(row, now)) return { ok: false, reason: "invalid" };
  if (orgHeader && !row.memberOrg) return { ok: false, reason: "not_member" };
  await touchSession(db, row, now);
  return {
    ok: true,
    sessionId: row.sessionId,
    caller: {
      userId: row.userId,
      // The session itself, also when opened with a token: tokens minted through the cookie are capped at the session's
      // absolute expiry (capToParent), which is already no later than that token's.
      tokenId: row.sessionId,
      scopes: null,
      orgId: row.memberOrg,
      role: row.role,
      tags: row.role ? effectiveTags(row.role, null) : [],
    },
  };
}
