/**
 * Memberships of one organization. Changes are serialized per organization: the
 * organization's row is locked first (so two owners demoting each other cannot
 * deadlock), and the rules are checked against the roles read under that lock,
 * not the ones read when the token was checked, so two concurrent demotions
 * cannot both pass the last-owner check.
 */
import { and, asc, count, eq, gt, inArray, ne } from "drizzle-orm";
import { ROLE_TAGS, type Role } from "../../shared/auth/permissions";
import { memberships, organizations, users } from "../../shared/db/schema";
import type { Db, Executor, Tx } from "../../shared/db/types";
import { ApiError, notFound } from "../../shared/http/errors";

const memberColumns = {
  userId: memberships.userId,
  email: users.email,
  name: users.name,
  role: memberships.role,
  joinedAt: memberships.createdAt,
};

export interface MemberRow {
  userId: string;
  email: string;
  name: string;
  role: Role;
  joinedAt: Date;
}

/** One page ordered by user id; one row more than `limit` tells there is a next page. */
export async function listMembers(ex: Executor, orgId: string, limit: number, cursor?: string): Promise<MemberRow[]> {
  return ex
    .select(memberColumns)
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(and(eq(memberships.orgId, orgId), cursor ? gt(memberships.userId, cursor) : undefined))
    .orderBy(asc(memberships.userId))
    .limit(limit + 1);
}

/**
 * Locks the organization's row, then checks the change against the caller's
 * current role: 403 without `org:admin` or when an owner is touched by a
 * non-owner, 404 for a non-member, 409 when the last owner would go.
 */
async function checkChange(tx: Tx, orgId: string, callerId: string, userId: string, newRole: Role | null) {
  await tx.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, orgId)).for("update");
  const rows = await tx
    .select({ userId: memberships.userId, role: memberships.role })
    .from(memberships)
    .where(and(eq(memberships.orgId, orgId), inArray(memberships.userId, [callerId, userId])));
  const callerRole = rows.find((r) => r.userId === callerId)?.role;
  if (!callerRole || !ROLE_TAGS[callerRole].includes("org:admin")) throw new ApiError("forbidden", "Missing permission 'org:admin'");
  const target = rows.find((r) => r.userId === userId);
  if (!target) throw notFound("Member");
  const touchesOwner = target.role === "owner" || newRole === "owner";
  if (touchesOwner && callerRole !== "owner") throw new ApiError("forbidden", "Only an owner can grant, change or remove the owner role");
  if (target.role === "owner" && newRole !== "owner") {
    const [owners] = await tx
      .select({ n: count() })
      .from(memberships)
      .where(and(eq(memberships.orgId, orgId), eq(memberships.role, "owner")));
    if (owners!.n <= 1) throw new ApiError("conflict", "The last owner cannot be demoted or removed");
  }
}

/** Sets a member's role on behalf of `callerId`; returns the member. */
export async function setMemberRole(db: Db, orgId: string, callerId: string, userId: string, role: Role): Promise<MemberRow> {
  return db.transaction(async (tx) => {
    await checkChange(tx, orgId, callerId, userId, role);
    await tx
      .update(memberships)
      .set({ role })
      .where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)));
    const [row] = await tx
      .select(memberColumns)
      .from(memberships)
      .innerJoin(users, eq(users.id, memberships.userId))
      .where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)));
    return row!;
  });
}

/** Removes a member on behalf of `callerId`. */
export async function removeMember(db: Db, orgId: string, callerId: string, userId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await checkChange(tx, orgId, callerId, userId, null);
    await tx.delete(memberships).where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)));
    // The removed user's default moves to another organization they belong to, if any.
    const [other] = await tx
      .select({ orgId: memberships.orgId })
      .from(memberships)
      .where(and(eq(memberships.userId, userId), ne(memberships.orgId, orgId)))
      .limit(1);
    await tx
      .update(users)
      .set({ defaultOrgId: other?.orgId ?? null })
      .where(and(eq(users.id, userId), eq(users.defaultOrgId, orgId)));
  });
}
