/** Identity (functions/identity/invitations.ts): invite, list, revoke and accept invitations. */
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { PendingInvitationSchema } from "../../../functions/identity/invitations";
import { ROLES } from "../../../shared/auth/permissions";
import { auditLog, invitations } from "../../../shared/db/schema";
import { pageOf } from "../../../shared/http/pagination";
import { storedIn, expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { identityHelpers, MEMBER_TAGS, sha256Hex, sorted, VIEWER_TAGS } from "../../support/identity";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { me, invite, accept, freshEmail, allMembers } = identityHelpers(h);
const PendingPage = pageOf(PendingInvitationSchema, "PendingInvitationPage");
const pending = (token: string, orgId: string, query = "") => h.request(`/api/orgs/${orgId}/invitations${query}`, { token });
const pendingItems = async (token: string, orgId: string, query = "") => (await expectBody(await pending(token, orgId, query), 200, PendingPage)).items;
const revoke = (token: string, orgId: string, id: string) => h.request(`/api/orgs/${orgId}/invitations/${id}`, { method: "DELETE", token });

describe("identity: invitations", () => {
  it("an admin invites and receives a one-time code valid for 7 days, stored hashed", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    const email = freshEmail();
    const before = Date.now();
    const inv = await expectStatus(await invite(admin.token, t.orgId, email, "member"), 201);
    expect(inv).toMatchObject({ email, role: "member", code: expect.any(String), expiresAt: expect.any(String) });
    expect(inv.code.length).toBeGreaterThanOrEqual(20);
    const ttl = new Date(inv.expiresAt).getTime() - before;
    expect(ttl).toBeGreaterThan(7 * 24 * 3600_000 - 60_000);
    expect(ttl).toBeLessThan(7 * 24 * 3600_000 + 60_000);
    expect(await storedIn(h, inv.code)).toEqual([]);
    expect(await storedIn(h, await sha256Hex(inv.code))).not.toEqual([]);
  });

  it("a member or a viewer cannot invite", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectProblem(await invite(member.token, t.orgId, freshEmail(), "member"), 403);
    await expectProblem(await invite(viewer.token, t.orgId, freshEmail(), "viewer"), 403);
    // Nor can an outsider.
    const outsider = await seedTenant(h);
    await expectProblem(await invite(outsider.token, t.orgId, freshEmail(), "viewer"), 403);
  });

  it("validates the e-mail address and the role", async () => {
    const t = await seedTenant(h);
    for (const email of ["not-an-email", "", "a@", 42]) {
      await expectProblem(await h.request(`/api/orgs/${t.orgId}/invitations`, { token: t.token, json: { email, role: "member" } }), 400, "email");
    }
    const p = await expectProblem(await invite(t.token, t.orgId, freshEmail(), "boss"), 400, "role");
    expect(p.allowed).toEqual([...ROLES]);
    await expectProblem(
      await h.request(`/api/orgs/${t.orgId}/invitations`, { token: t.token, json: { email: freshEmail(), role: "member", note: "hi" } }),
      400,
      "note",
    );
  });

  it("only an owner may invite an owner", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    await expectProblem(await invite(admin.token, t.orgId, freshEmail(), "owner"), 403);
    await expectStatus(await invite(admin.token, t.orgId, freshEmail(), "admin"), 201);
    const inv = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "owner"), 201);
    expect(inv.role).toBe("owner");
  });

  it("accepting without a bearer creates the user, the membership and a first token, once", async () => {
    const t = await seedTenant(h);
    const email = freshEmail();
    const inv = await expectStatus(await invite(t.token, t.orgId, email, "viewer"), 201);
    const res = await expectStatus(await accept({ code: inv.code, name: "New Person" }), 200);
    expect(res).toEqual({
      user: { id: expect.stringMatching(/^usr_/), email, name: "New Person" },
      organizationId: t.orgId,
      token: expect.stringMatching(/^wsp_/),
    });
    const body = await me(res.token);
    expect(body.user).toEqual(res.user);
    expect(body.activeOrganizationId).toBe(t.orgId);
    expect(body.organizations).toEqual([{ id: t.orgId, name: `org ${t.email}`, role: "viewer" }]);
    expect(sorted(body.tags)).toEqual(sorted(VIEWER_TAGS));
    expect(body.tokenScopes).toBeNull();
    expect((await allMembers(t.token, t.orgId)).find((m) => m.userId === res.user.id)?.role).toBe("viewer");

    // The code works once.
    await expectProblem(await accept({ code: inv.code, name: "Again" }), 404);
    await expectProblem(await accept({ code: inv.code }, res.token), 404);
  });

  it("a wrong code answers 404", async () => {
    const t = await seedTenant(h);
    await expectProblem(await accept({ code: "wsi_doesnotexist", name: "X" }), 404);
    await expectProblem(await accept({ code: "wsi_doesnotexist" }, t.token), 404);
    await expectProblem(await accept({ name: "X" }), 400, "code");
  });

  it("a new account needs a name, and the code survives the failed attempt", async () => {
    const t = await seedTenant(h);
    const email = freshEmail();
    const inv = await expectStatus(await invite(t.token, t.orgId, email, "member"), 201);
    await expectProblem(await accept({ code: inv.code }), 400, "name");
    await expectProblem(await accept({ code: inv.code, name: "  " }), 400, "name");
    const res = await expectStatus(await accept({ code: inv.code, name: "Named" }), 200);
    expect(res.user.email).toBe(email);
    expect(sorted((await me(res.token)).tags)).toEqual(sorted(MEMBER_TAGS));
  });

  it("an existing user's invitation needs that user's bearer token", async () => {
    const t = await seedTenant(h);
    const existing = await seedTenant(h);
    const stranger = await seedTenant(h);
    const inv = await expectStatus(await invite(t.token, t.orgId, existing.email, "admin"), 201);

    await expectProblem(await accept({ code: inv.code, name: "Impostor" }), 401);
    await expectProblem(await accept({ code: inv.code }, stranger.token), 403);
    expect((await me(stranger.token)).organizations).toHaveLength(1);

    // The code is still usable by the right user.
    const res = await expectStatus(await accept({ code: inv.code }, existing.token), 200);
    expect(res).toEqual({ user: { id: existing.userId, email: existing.email, name: "Test Owner" }, organizationId: t.orgId, token: null });
    const body = await me(existing.token, t.orgId);
    expect(body.activeOrganizationId).toBe(t.orgId);
    expect(sorted(body.organizations.map((o: { id: string; role: string }) => `${o.id}:${o.role}`))).toEqual(
      sorted([`${existing.orgId}:owner`, `${t.orgId}:admin`]),
    );
    // The default organization did not change.
    expect((await me(existing.token)).activeOrganizationId).toBe(existing.orgId);
    await expectProblem(await accept({ code: inv.code }, existing.token), 404);
  });

  it("an invitation to a user who is already a member answers 409", async () => {
    const t = await seedTenant(h);
    const m = await seedMember(h, t.orgId, "viewer");
    const inv = await expectStatus(await invite(t.token, t.orgId, m.email, "admin"), 201);
    await expectProblem(await accept({ code: inv.code }, m.token), 409);
    // The role did not change.
    expect((await me(m.token)).organizations).toEqual([expect.objectContaining({ id: t.orgId, role: "viewer" })]);
  });

  it("a bad bearer token on the accept route answers 401", async () => {
    const t = await seedTenant(h);
    const inv = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "member"), 201);
    await expectProblem(await accept({ code: inv.code, name: "X" }, `wsp_${"B".repeat(43)}`), 401);
    // The code is still usable.
    await expectStatus(await accept({ code: inv.code, name: "X" }), 200);
  });

  it("an admin lists the open, unexpired invitations oldest first, with who invited, never the code", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    const first = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "member"), 201);
    const second = await expectStatus(await invite(admin.token, t.orgId, freshEmail(), "viewer"), 201);
    const accepted = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "viewer"), 201);
    const expired = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "viewer"), 201);
    await expectStatus(await accept({ code: accepted.code, name: "Joined" }), 200);
    await h.db
      .update(invitations)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(invitations.id, expired.id));

    const res = await pending(admin.token, t.orgId);
    const text = await res.clone().text();
    const items = (await expectBody(res, 200, PendingPage)).items;
    expect(items).toEqual([
      {
        id: first.id,
        email: first.email,
        role: "member",
        invitedBy: { userId: t.userId, email: t.email },
        createdAt: expect.any(String),
        expiresAt: first.expiresAt,
      },
      {
        id: second.id,
        email: second.email,
        role: "viewer",
        invitedBy: { userId: admin.userId, email: admin.email },
        createdAt: expect.any(String),
        expiresAt: second.expiresAt,
      },
    ]);
    for (const inv of [first, second]) expect(text).not.toContain(inv.code);
    expect(text).not.toContain(await sha256Hex(first.code));

    // Pages of one, by cursor.
    const page1 = await expectBody(await pending(t.token, t.orgId, "?limit=1"), 200, PendingPage);
    expect(page1.items.map((i) => i.id)).toEqual([first.id]);
    const page2 = await expectBody(await pending(t.token, t.orgId, `?limit=1&cursor=${page1.nextCursor}`), 200, PendingPage);
    expect(page2).toEqual({ items: [expect.objectContaining({ id: second.id })], nextCursor: null });
    await expectProblem(await pending(t.token, t.orgId, "?limit=0"), 400, "limit");
  });

  it("only those who may invite list invitations; another organization's are not listed", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    await expectStatus(await invite(other.token, other.orgId, freshEmail(), "member"), 201);
    expect(await pendingItems(t.token, t.orgId)).toEqual([]);
    for (const role of ["member", "viewer"] as const) {
      const m = await seedMember(h, t.orgId, role);
      await expectProblem(await pending(m.token, t.orgId), 403);
    }
    await expectProblem(await pending(t.token, other.orgId), 403);
  });

  it("an admin revokes an invitation: 204, its code refused from then on, an audit row without the code", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    const email = freshEmail();
    const inv = await expectStatus(await invite(t.token, t.orgId, email, "owner"), 201);
    const kept = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "member"), 201);
    // An admin may revoke an invitation to the owner role (revoking grants nothing).
    expect(await expectStatus(await revoke(admin.token, t.orgId, inv.id), 204)).toBeUndefined();
    expect((await pendingItems(t.token, t.orgId)).map((i) => i.id)).toEqual([kept.id]);
    await expectProblem(await accept({ code: inv.code, name: "Too Late" }), 404);
    // Already revoked: 404.
    await expectProblem(await revoke(admin.token, t.orgId, inv.id), 404);

    const rows = await h.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.orgId, t.orgId), eq(auditLog.action, "invitation.revoked")));
    expect(rows).toEqual([
      expect.objectContaining({ actorUserId: admin.userId, targetKind: "invitation", targetId: inv.id, details: { email, role: "owner" } }),
    ]);
    expect(JSON.stringify(rows)).not.toContain(inv.code);
  });

  it("revoking: another organization's, an accepted or an unknown invitation 404; a member or viewer 403", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const theirs = await expectStatus(await invite(other.token, other.orgId, freshEmail(), "member"), 201);
    await expectProblem(await revoke(t.token, t.orgId, theirs.id), 404);
    await expectProblem(await revoke(t.token, other.orgId, theirs.id), 403);
    // Still open in its own organization.
    expect((await pendingItems(other.token, other.orgId)).map((i) => i.id)).toEqual([theirs.id]);

    const accepted = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "viewer"), 201);
    await expectStatus(await accept({ code: accepted.code, name: "Joined" }), 200);
    await expectProblem(await revoke(t.token, t.orgId, accepted.id), 404);
    await expectProblem(await revoke(t.token, t.orgId, "inv_doesnotexist"), 404);

    const open = await expectStatus(await invite(t.token, t.orgId, freshEmail(), "viewer"), 201);
    for (const role of ["member", "viewer"] as const) {
      const m = await seedMember(h, t.orgId, role);
      await expectProblem(await revoke(m.token, t.orgId, open.id), 403);
    }
    expect((await pendingItems(t.token, t.orgId)).map((i) => i.id)).toEqual([open.id]);
  });
});
