/** Identity data operations shared by the routes and the self-hosted bootstrap. */
import { and, count, eq, isNull, sql } from "drizzle-orm";
import type { Role } from "../../shared/auth/permissions";
import { displayPrefix, generateToken, hashToken } from "../../shared/auth/tokens";
import { apiTokens, memberships, organizations, users } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { seedMemberNotifications } from "../notifications/fanout";

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
  await tx.update(users).set({ defaultOrgId: orgId }).where(and(eq(users.id, userId), isNull(users.defaultOrgId)));
  // An in_app channel and a subscription grid from the organization's defaults.
  await seedMemberNotifications(tx, orgId, userId);
}

export async function createOrganization(tx: Executor, name: string, ownerId: string) {
  const [org] = await tx.insert(organizations).values({ id: newId("org"), name }).returning();
  await addMember(tx, org!.id, ownerId, "owner");
  return org!;
}

export async function issueToken(
  tx: Executor,
  input: { userId: string; name: string; scopes: string[] | null; expiresAt: Date | null; token?: string },
) {
  const token = input.token ?? generateToken();
  const [row] = await tx
    .insert(apiTokens)
    .values({
      id: newId("tok"),
      userId: input.userId,
      name: input.name,
      tokenHash: await hashToken(token),
      displayPrefix: displayPrefix(token),
      scopes: input.scopes,
      expiresAt: input.expiresAt,
    })
    .returning();
  return { row: row!, token };
}

export interface BootstrapResult {
  userId: string;
  orgId: string;
  token: string;
}

/**
 * First start on an empty database: an owner, an organization and an all-tags
 * token. Returns null when any user exists already. `beforeCommit` runs inside the
 * transaction (e.g. saving the token where the operator finds it): if it throws,
 * nothing is created.
 */
export async function bootstrapOwner(
  db: Db,
  opts: { token?: string; beforeCommit?: (result: BootstrapResult) => void | Promise<void> } = {},
): Promise<BootstrapResult | null> {
  return db.transaction(async (tx) => {
    // Several processes may start at once on one Postgres: only one bootstraps.
    await tx.execute(sql`select pg_advisory_xact_lock(727002)`);
    const [existing] = await tx.select({ n: count() }).from(users);
    if (existing!.n > 0) return null;
    const user = await createUser(tx, { email: "owner@localhost", name: "Owner" });
    const org = await createOrganization(tx, "Default organization", user.id);
    const { token } = await issueToken(tx, { userId: user.id, name: "owner", scopes: null, expiresAt: null, token: opts.token });
    const result = { userId: user.id, orgId: org.id, token };
    await opts.beforeCommit?.(result);
    return result;
  });
}
