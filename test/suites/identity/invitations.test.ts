/** Identity (functions/identity/invitations.ts): invite, list, revoke and accept invitations. */
import { describe, expect, it } from "vitest";
import { ROLES } from "../../../shared/auth/permissions";
import { storedIn, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { identityHelpers, MEMBER_TAGS, sha256Hex, sorted, VIEWER_TAGS } from "../../support/identity";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { me, invite, accept, freshEmail, allMembers } = identityHelpers(h);

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
});
