/**
 * Users, organizations, joining one, and personal access tokens: the identity
 * data the routes, the invitations and the self-hosted bootstrap share.
 * Members are in members-store.ts, invitations in invitations-store.ts.
 */
import { and, asc, count, eq, gt, isNull, sql } from "drizzle-orm";
import type { Role } from "../../shared/auth/permissions";
import { displayPrefix, generateToken, hashToken } from "../../shared/auth/tokens";
import { apiTokens, memberships, organizations, users } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { seedMemberNotifications } from "../notifications/fanout";

export async function findUser(ex: Executor, userId: string) {
  const [user] = await ex.select({ id: users.id, email: users.email, name: users.name }).from(users).where(eq(users.id, userId));
  return user;
}

/** The user's organizations with their role there, by organization id. */
export async function organizationsOf(ex: Executor, userId: string) {
  return ex
    .select({ id: organizations.id, name: organizations.name, role: memberships.role })
    .from(memberships)
    .innerJoin(organizations, eq(organizations.id, memberships.orgId))
    .where(eq(memberships.userId, userId))
    .orderBy(organizations.id);
}

export async function createUser(tx: Executor, input: { email: string; name: string }) {
  const [user] = await tx
    .insert(users)
    .values({ id: newId("usr"), email: input.email, name: input.name })
    .returning();
  return user!;
}

/**
 * Creates the user unless the e-mail (case-insensitively) is taken; null then. On
 * Postgres a concurrent insert of the same e-mail waits for the other transaction
 * and yields null once it commits, instead of a unique violation.
 */
export async function createUserIfNew(tx: Executor, input: { email: string; name: string }) {
  const [user] = await tx
    .insert(users)
    .values({ id: newId("usr"), email: input.email, name: input.name })
    .onConflictDoNothing()
    .returning();
  return user ?? null;
}

/** Adds a member; the organization becomes the user's default if they had none. */
export async function addMember(tx: Executor, orgId: string, userId: string, role: Role) {
  await tx.insert(memberships).values({ orgId, userId, role });
  await tx
    .update(users)
    .set({ defaultOrgId: orgId })
    .where(and(eq(users.id, userId), isNull(users.defaultOrgId)));
  // An in_app channel and a subscription grid from the organization's defaults.
  await seedMemberNotifications(tx, orgId, userId);
}

export async function createOrganization(tx: Executor, name: string, ownerId: string) {
  const [org] = await tx
    .insert(organizations)
    .values({ id: newId("org"), name })
    .returning();
  await addMember(tx, org!.id, ownerId, "owner");
  return org!;
}

/** createOrganization in a transaction of its own (POST /api/orgs): the organization and its owner, or nothing. */
export async function registerOrganization(db: Db, name: string, ownerId: string) {
  return db.transaction((tx) => createOrganization(tx, name, ownerId));
}

export async function issueToken(tx: Executor, input: { userId: string; name: string; scopes: string[] | null; expiresAt: Date | null; token?: string }) {
  const token = input.token ?? generateToken();
  const [row] = await tx
    .insert(apiTokens)
    .values({
      id: newId("tok"),
      userId: input.userId,
      name: input.name,
      tokenHash: hashToken(token),
      displayPrefix: displayPrefix(token),
      scopes: input.scopes,
      expiresAt: input.expiresAt,
    })
    .returning();
  return { row: row!, token };
}

export type TokenRow = typeof apiTokens.$inferSelect;

/** One page of the user's unrevoked personal tokens, oldest first; one row more than `limit` tells there is a next page. */
export async function listPersonalTokens(ex: Executor, userId: string, limit: number, cursor?: string): Promise<TokenRow[]> {
  return ex
    .select()
    .from(apiTokens)
    .where(and(eq(apiTokens.userId, userId), eq(apiTokens.kind, "personal"), isNull(apiTokens.revokedAt), cursor ? gt(apiTokens.id, cursor) : undefined))
    .orderBy(asc(apiTokens.id))
    .limit(limit + 1);
}

/** Revokes one of the user's unrevoked personal tokens; false when there is none with this id. */
export async function revokePersonalToken(ex: Executor, userId: string, tokenId: string, now: Date): Promise<boolean> {
  const revoked = await ex
    .update(apiTokens)
    .set({ revokedAt: now })
    .where(and(eq(apiTokens.id, tokenId), eq(apiTokens.userId, userId), eq(apiTokens.kind, "personal"), isNull(apiTokens.revokedAt)))
    .returning({ id: apiTokens.id });
  return revoked.length > 0;
}

interface BootstrapResult {
  userId: string;
  orgId: string;
  token: string;
}

/**
 * The first owner's address unless WORKSPACE_OWNER_EMAIL names one: under `.localhost`
 * (RFC 6761, never a real mailbox), and a valid address by the API's own e-mail check,
 * so the console's sign-in form takes it (`owner@localhost` has no dot in its domain and
 * was refused).
 */
export const DEFAULT_OWNER_EMAIL = "owner@workspace.localhost";

/**
 * First start on an empty database: an owner (`email`, default DEFAULT_OWNER_EMAIL),
 * an organization and an all-tags token. Returns null when any user exists already.
 * `beforeCommit` runs inside the transaction (e.g. saving the token where the
 * operator finds it): if it throws, nothing is created.
 */
export async function bootstrapOwner(
  db: Db,
  opts: { token?: string; email?: string; beforeCommit?: (result: BootstrapResult) => void | Promise<void> } = {},
): Promise<BootstrapResult | null> {
  return db.transaction(async (tx) => {
    // Several processes may start at once on one Postgres: only one bootstraps.
    await tx.execute(sql`select pg_advisory_xact_lock(727002)`);
    const [existing] = await tx.select({ n: count() }).from(users);
    if (existing!.n > 0) return null;
    const user = await createUser(tx, { email: opts.email ?? DEFAULT_OWNER_EMAIL, name: "Owner" });
    const org = await createOrganization(tx, "Default organization", user.id);
    const { token } = await issueToken(tx, { userId: user.id, name: "owner", scopes: null, expiresAt: null, token: opts.token });
    const result = { userId: user.id, orgId: org.id, token };
    await opts.beforeCommit?.(result);
    return result;
  });
}
