/** Identity (functions/identity/members.ts): list, change the role of and remove members; demotion and races. */
import { describe, expect, it } from "vitest";
import { MemberSchema } from "../../../functions/identity/members";
import { ROLES, TAGS } from "../../../shared/auth/permissions";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { identityHelpers, MemberPage, sorted, VIEWER_TAGS } from "../../support/identity";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { me, members, setRole, removeMember, invite, accept, freshEmail, allMembers } = identityHelpers(h);

describe("identity: demotion", () => {
  it("takes effect at once for existing tokens", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    await expectStatus(await invite(admin.token, t.orgId, freshEmail(), "member"), 201);
    const updated = await expectBody(await setRole(t.token, t.orgId, admin.userId, "viewer"), 200, MemberSchema);
    expect(updated).toMatchObject({ userId: admin.userId, role: "viewer" });
    await expectProblem(await invite(admin.token, t.orgId, freshEmail(), "member"), 403);
    expect(sorted((await me(admin.token)).tags)).toEqual(sorted(VIEWER_TAGS));
  });
});

describe("identity: members", () => {
  it("lists members with keyset pagination", async () => {
    const t = await seedTenant(h);
    const b = await seedMember(h, t.orgId, "member");
    const c = await seedMember(h, t.orgId, "viewer");
    const expected = [t.userId, b.userId, c.userId].sort();

    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 3; page++) {
      const query: string = `?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const body: { items: Array<{ userId: string }>; nextCursor: string | null } = await expectBody(await members(t.token, t.orgId, query), 200, MemberPage);
      expect(body.items).toHaveLength(1);
      seen.push(body.items[0]!.userId);
      cursor = body.nextCursor;
      if (page < 2) expect(cursor).toEqual(expect.any(String));
      else expect(cursor).toBeNull();
    }
    expect(seen).toEqual(expected);

    const all = await expectBody(await members(b.token, t.orgId), 200, MemberPage);
    expect(all.nextCursor).toBeNull();
    const owner = all.items.find((m: { userId: string }) => m.userId === t.userId);
    expect(owner).toEqual({ userId: t.userId, email: t.email, name: "Test Owner", role: "owner", joinedAt: expect.any(String) });
    expect(all.items.map((m: { role: string }) => m.role).sort()).toEqual(["member", "owner", "viewer"]);
  });

  it("answers 403 to a non-member", async () => {
    const t = await seedTenant(h);
    const outsider = await seedTenant(h);
    await expectProblem(await members(outsider.token, t.orgId), 403);
    await expectProblem(await members(outsider.token, newId("org")), 403);
  });

  it("an owner changes a member's role", async () => {
    const t = await seedTenant(h);
    const m = await seedMember(h, t.orgId, "member");
    const body = await expectBody(await setRole(t.token, t.orgId, m.userId, "admin"), 200, MemberSchema);
    expect(body).toEqual({ userId: m.userId, email: m.email, name: "Test member", role: "admin", joinedAt: expect.any(String) });
    expect(sorted((await me(m.token)).tags)).toEqual(sorted(TAGS));
    await expectBody(await setRole(t.token, t.orgId, m.userId, "owner"), 200, MemberSchema);
    expect((await me(m.token)).organizations).toEqual([expect.objectContaining({ id: t.orgId, role: "owner" })]);
  });

  it("the last owner can be neither demoted nor removed", async () => {
    const t = await seedTenant(h);
    await seedMember(h, t.orgId, "admin");
    for (const role of ["admin", "member", "viewer"]) {
      await expectProblem(await setRole(t.token, t.orgId, t.userId, role), 409);
    }
    await expectProblem(await removeMember(t.token, t.orgId, t.userId), 409);
    // Setting the owner's role to owner again is not a demotion.
    await expectBody(await setRole(t.token, t.orgId, t.userId, "owner"), 200, MemberSchema);
    expect((await me(t.token)).organizations[0].role).toBe("owner");

    // With a second owner, one of them may step down.
    const second = await seedMember(h, t.orgId, "owner");
    await expectBody(await setRole(t.token, t.orgId, t.userId, "admin"), 200, MemberSchema);
    await expectProblem(await removeMember(second.token, t.orgId, second.userId), 409);
  });

  it("an admin can neither change nor remove an owner, nor grant the owner role", async () => {
    const t = await seedTenant(h);
    await seedMember(h, t.orgId, "owner");
    const admin = await seedMember(h, t.orgId, "admin");
    const m = await seedMember(h, t.orgId, "member");
    await expectProblem(await setRole(admin.token, t.orgId, t.userId, "member"), 403);
    await expectProblem(await removeMember(admin.token, t.orgId, t.userId), 403);
    await expectProblem(await setRole(admin.token, t.orgId, m.userId, "owner"), 403);
    await expectProblem(await setRole(admin.token, t.orgId, admin.userId, "owner"), 403);
    // Nothing changed.
    const roles = Object.fromEntries((await allMembers(t.token, t.orgId)).map((x) => [x.userId, x.role]));
    expect(roles[t.userId]).toBe("owner");
    expect(roles[m.userId]).toBe("member");
    expect(roles[admin.userId]).toBe("admin");
    // An admin may manage non-owners.
    await expectBody(await setRole(admin.token, t.orgId, m.userId, "viewer"), 200, MemberSchema);
    await expectStatus(await removeMember(admin.token, t.orgId, m.userId), 204);
  });

  it("a member or a viewer can neither change roles nor remove members", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    const viewer = await seedMember(h, t.orgId, "viewer");
    for (const actor of [member, viewer]) {
      const target = actor === member ? viewer : member;
      await expectProblem(await setRole(actor.token, t.orgId, target.userId, "viewer"), 403);
      await expectProblem(await setRole(actor.token, t.orgId, actor.userId, "admin"), 403);
      await expectProblem(await removeMember(actor.token, t.orgId, target.userId), 403);
      await expectProblem(await removeMember(actor.token, t.orgId, t.userId), 403);
    }
    expect(await allMembers(t.token, t.orgId)).toHaveLength(3);
  });

  it("a removed member loses access to the organization at once", async () => {
    const t = await seedTenant(h);
    const m = await seedMember(h, t.orgId, "member");
    await expectStatus(await h.request("/api/settings", { token: m.token, org: t.orgId }), 200);
    await expectStatus(await removeMember(t.token, t.orgId, m.userId), 204);
    await expectProblem(await h.request("/api/settings", { token: m.token, org: t.orgId }), 403);
    await expectProblem(await h.request("/api/me", { token: m.token, org: t.orgId }), 403);
    await expectProblem(await members(m.token, t.orgId), 403);
    const body = await me(m.token);
    expect(body.organizations).toEqual([]);
    expect(body.activeOrganizationId).toBeNull();
    expect((await allMembers(t.token, t.orgId)).map((x) => x.userId)).not.toContain(m.userId);
    // Removing again: not found.
    await expectProblem(await removeMember(t.token, t.orgId, m.userId), 404);
  });

  it("a removed member's default moves to another organization they belong to", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const m = await seedMember(h, t.orgId, "member");
    const inv = await expectStatus(await invite(other.token, other.orgId, m.email, "viewer"), 201);
    await expectStatus(await accept({ code: inv.code }, m.token), 200);
    expect((await me(m.token)).activeOrganizationId).toBe(t.orgId);
    await expectStatus(await removeMember(t.token, t.orgId, m.userId), 204);
    const body = await me(m.token);
    expect(body.activeOrganizationId).toBe(other.orgId);
    expect(body.organizations).toEqual([expect.objectContaining({ id: other.orgId, role: "viewer" })]);
  });

  it("an unknown user id answers 404", async () => {
    const t = await seedTenant(h);
    await expectProblem(await setRole(t.token, t.orgId, newId("usr"), "member"), 404);
    await expectProblem(await removeMember(t.token, t.orgId, newId("usr")), 404);
    // A user of another organization is not a member here either.
    const other = await seedTenant(h);
    await expectProblem(await setRole(t.token, t.orgId, other.userId, "member"), 404);
    await expectProblem(await removeMember(t.token, t.orgId, other.userId), 404);
    expect((await me(other.token)).organizations).toHaveLength(1);
  });

  it("a bad role answers 400 naming the allowed roles", async () => {
    const t = await seedTenant(h);
    const m = await seedMember(h, t.orgId, "member");
    for (const role of ["superuser", "", null, 3]) {
      await expectProblem(await setRole(t.token, t.orgId, m.userId, role), 400, "role");
    }
    const p = await expectProblem(await setRole(t.token, t.orgId, m.userId, "superuser"), 400, "role");
    expect(p.allowed).toEqual([...ROLES]);
    await expectProblem(await h.request(`/api/orgs/${t.orgId}/members/${m.userId}`, { method: "PATCH", token: t.token, json: {} }), 400, "role");
    await expectProblem(
      await h.request(`/api/orgs/${t.orgId}/members/${m.userId}`, { method: "PATCH", token: t.token, json: { role: "viewer", admin: true } }),
      400,
      "admin",
    );
    expect((await allMembers(t.token, t.orgId)).find((x) => x.userId === m.userId)!.role).toBe("member");
  });
});

describe("identity: concurrency", () => {
  it("two owners demoting each other at once: one wins, one gets 409, one owner remains", async (ctx) => {
    // The harness is only known once beforeAll ran, so `it.runIf` cannot see it at collection time.
    if (!h.realConcurrency) return ctx.skip("needs a database that runs transactions concurrently");
    for (let round = 0; round < 5; round++) {
      const t = await seedTenant(h);
      const second = await seedMember(h, t.orgId, "owner");
      const [a, b] = await Promise.all([setRole(t.token, t.orgId, second.userId, "admin"), setRole(second.token, t.orgId, t.userId, "admin")]);
      const outcome = await Promise.all([a, b].map(async (r) => ({ status: r.status, body: await r.text() })));
      // On failure, show the logged cause of any 500 next to the responses.
      const causes = outcome
        .filter((o) => o.status >= 500)
        .flatMap((o) => h.logs.filter((l) => l.includes(JSON.parse(o.body).requestId) && l.includes("unhandled")));
      // The loser answers 409 when both passed the guard as owners. If the winner committed before the
      // loser was even authenticated, the loser is already an admin and 403 is the right answer.
      const statuses = outcome.map((o) => o.status).sort();
      expect([JSON.stringify([200, 409]), JSON.stringify([200, 403])], JSON.stringify({ outcome, causes })).toContain(JSON.stringify(statuses));
      const owners = (await allMembers(a.status === 200 ? t.token : second.token, t.orgId)).filter((m) => m.role === "owner");
      expect(owners).toHaveLength(1);
    }
  });
});
