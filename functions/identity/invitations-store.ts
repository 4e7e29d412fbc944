/**
 * Invitations. A code is consumed by a single conditional UPDATE, so it works
 * once; accepting runs in one transaction, so a refused accept leaves the
 * invitation open. Revoking deletes the open row: a code whose row is gone
 * matches nothing, and the audit log keeps the record that it existed.
 */
import { and, asc, eq, gt, isNull, sql } from "drizzle-orm";
import type { Role } from "../../shared/auth/permissions";
import { invitations, memberships, users } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { ApiError, badRequest, notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { addMember, createUserIfNew, issueToken } from "./store";

interface NewInvitation {
  orgId: string;
  email: string;
  role: Role;
  codeHash: string;
  invitedBy: string;
  expiresAt: Date;
}

/** Records an invitation; returns its id. */
export async function createInvitation(ex: Executor, input: NewInvitation): Promise<string> {
  const id = newId("inv");
  await ex.insert(invitations).values({ id, ...input });
  return id;
}

export interface PendingInvitation {
  id: string;
  email: string;
  role: Role;
  invitedBy: { userId: string; email: string } | null;
  createdAt: Date;
  expiresAt: Date;
}

/** The organization's open (not accepted), unexpired invitations, oldest first (ids sort by creation): `limit + 1` rows for toPage. */
export async function listPendingInvitations(ex: Executor, orgId: string, now: Date, limit: number, cursor?: string): Promise<PendingInvitation[]> {
  const rows = await ex
    .select({
      id: invitations.id,
      email: invitations.email,
      role: invitations.role,
      inviterId: users.id,
      inviterEmail: users.email,
      createdAt: invitations.createdAt,
      expiresAt: invitations.expiresAt,
    })
    .from(invitations)
    .leftJoin(users, eq(users.id, invitations.invitedBy))
    .where(and(eq(invitations.orgId, orgId), isNull(invitations.acceptedAt), gt(invitations.expiresAt, now), cursor ? gt(invitations.id, cursor) : undefined))
    .orderBy(asc(invitations.id))
    .limit(limit + 1);
  return rows.map(({ inviterId, inviterEmail, ...r }) => ({ ...r, invitedBy: inviterId && inviterEmail ? { userId: inviterId, email: inviterEmail } : null }));
}

/**
 * Revokes an invitation of this organization that was not accepted (an expired one too: it is
 * tidied away); returns what it was, or null when there is none (another organization's id, an
 * accepted or an already revoked one), which the route answers 404 like an unknown id. One
 * conditional DELETE, so it and a concurrent accept cannot both succeed.
 */
export async function revokeInvitation(ex: Executor, orgId: string, id: string): Promise<{ email: string; role: Role } | null> {
  const [row] = await ex
    .delete(invitations)
    .where(and(eq(invitations.id, id), eq(invitations.orgId, orgId), isNull(invitations.acceptedAt)))
    .returning({ email: invitations.email, role: invitations.role });
  return row ?? null;
}

/**
 * Accepts the open, unexpired invitation with this code hash:
 * - the e-mail belongs to a user: only that user (`callerId`) may accept (401
 *   without a caller, 403 for another one, 409 if already a member); the
 *   membership is added and no token is issued;
 * - a new e-mail: only without a caller (403 otherwise), `name` required (400);
 *   creates the user, the membership and a first token. A concurrent accept that
 *   created the same e-mail first answers 409 (the user insert does nothing on
 *   conflict, waiting for the other transaction on Postgres).
 */
export async function acceptInvitation(db: Db, input: { codeHash: string; now: Date; callerId: string | null; name?: string }) {
  const { codeHash, now, callerId, name } = input;
  return db.transaction(async (tx) => {
    const [invitation] = await tx
      .update(invitations)
      .set({ acceptedAt: now })
      .where(and(eq(invitations.codeHash, codeHash), isNull(invitations.acceptedAt), gt(invitations.expiresAt, now)))
      .returning();
    if (!invitation) throw notFound("Invitation");
    const [existing] = await tx.select().from(users).where(sql`lower(${users.email}) = lower(${invitation.email})`);
    if (existing) {
      if (!callerId) throw new ApiError("unauthorized", "This address has an account: accept with that user's bearer token");
      if (callerId !== existing.id) throw new ApiError("forbidden", "This invitation was sent to another address");
      const [member] = await tx
        .select({ role: memberships.role })
        .from(memberships)
        .where(and(eq(memberships.orgId, invitation.orgId), eq(memberships.userId, existing.id)));
      if (member) throw new ApiError("conflict", "Already a member of this organization");
      await addMember(tx, invitation.orgId, existing.id, invitation.role);
      return { user: existing, organizationId: invitation.orgId, token: null };
    }
    if (callerId) throw new ApiError("forbidden", "This invitation was sent to another address");
    if (!name) throw badRequest("name", "name is required to create an account");
    const user = await createUserIfNew(tx, { email: invitation.email, name });
    // Another invitation for this address was accepted at the same moment and created the account
    // (the whole transaction, this invitation's acceptance included, is rolled back).
    if (!user) throw new ApiError("conflict", "An account with this e-mail was just created; sign in as that user and accept again with its bearer token");
    await addMember(tx, invitation.orgId, user.id, invitation.role);
    const { token } = await issueToken(tx, { userId: user.id, name: "first token", scopes: null, expiresAt: null });
    return { user, organizationId: invitation.orgId, token };
  });
}
