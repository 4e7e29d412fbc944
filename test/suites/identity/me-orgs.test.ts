/** Identity (functions/identity/me.ts, orgs.ts): GET /api/me, POST /api/orgs, and the tags each role holds. */
import { describe, expect, it } from "vitest";
import { TAGS } from "../../../shared/auth/permissions";
import { newId } from "../../../shared/ids";
import { expectProblem, seedMember, seedTenant, seedToken } from "../../support/harness";
import { ADMIN_TAGS, identityHelpers, MEMBER_TAGS, sorted, VIEWER_TAGS } from "../../support/identity";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { me, createOrg, allMembers } = identityHelpers(h);

describe("identity: GET /api/me", () => {
  it("returns the user, organizations with role, the default organization and every tag for an owner", async () => {
    const t = await seedTenant(h);
    const body = await me(t.token);
    expect(body.user).toEqual({ id: t.userId, email: t.email, name: "Test Owner" });
    expect(body.organizations).toEqual([{ id: t.orgId, name: `org ${t.email}`, role: "owner" }]);
    expect(body.activeOrganizationId).toBe(t.orgId);
    expect(body.tags).toHaveLength(12);
    expect(sorted(body.tags)).toEqual(sorted(TAGS));
    expect(body.tags).toContain("org:admin");
    expect(body.tokenScopes).toBeNull();
  });

  it("X-Organization-Id switches the active organization", async () => {
    const t = await seedTenant(h);
    const second = await createOrg(t.token, "second org");
    const switched = await me(t.token, second.id);
    expect(switched.activeOrganizationId).toBe(second.id);
    expect(sorted(switched.organizations.map((o: { id: string }) => o.id))).toEqual(sorted([t.orgId, second.id]));
    expect(sorted(switched.tags)).toEqual(sorted(TAGS));
    // Without the header the default organization stays active.
    expect((await me(t.token)).activeOrganizationId).toBe(t.orgId);
  });

  it("shows the token's scopes and the tags they leave", async () => {
    const t = await seedTenant(h);
    const scoped = await seedToken(h, t.userId, { scopes: ["settings:read", "project:list"] });
    const body = await me(scoped.token);
    expect(sorted(body.tokenScopes)).toEqual(["project:list", "settings:read"]);
    expect(sorted(body.tags)).toEqual(["project:list", "settings:read"]);
  });

  it("answers 403 for an organization the caller is not a member of, or that does not exist", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const p = await expectProblem(await h.request("/api/me", { token: t.token, org: other.orgId }), 403);
    expect(p.detail).toMatch(/member/i);
    await expectProblem(await h.request("/api/me", { token: t.token, org: newId("org") }), 403);
    await expectProblem(await h.request("/api/settings", { token: t.token, org: other.orgId }), 403);
  });
});

describe("identity: POST /api/orgs", () => {
  it("creates an organization whose owner is the caller", async () => {
    const t = await seedTenant(h);
    const org = await createOrg(t.token, "  Acme  ");
    expect(org).toEqual({ id: expect.stringMatching(/^org_/), name: "Acme", role: "owner" });
    const body = await me(t.token);
    expect(body.organizations).toContainEqual({ id: org.id, name: "Acme", role: "owner" });
    const list = await allMembers(t.token, org.id);
    expect(list).toEqual([expect.objectContaining({ userId: t.userId, role: "owner" })]);
  });

  it("requires a non-empty name and refuses unknown fields", async () => {
    const t = await seedTenant(h);
    await expectProblem(await h.request("/api/orgs", { token: t.token, json: { name: "" } }), 400, "name");
    await expectProblem(await h.request("/api/orgs", { token: t.token, json: { name: "   " } }), 400, "name");
    await expectProblem(await h.request("/api/orgs", { token: t.token, json: {} }), 400, "name");
    const p = await expectProblem(await h.request("/api/orgs", { token: t.token, json: { name: "ok", plan: "pro" } }), 400, "plan");
    expect(p.detail).toContain("plan");
    expect((await me(t.token)).organizations).toHaveLength(1);
  });
});

describe("identity: roles", () => {
  it("an admin holds every tag", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    expect(sorted((await me(admin.token)).tags)).toEqual(sorted(TAGS));
  });

  it("a member holds every tag but project:admin, notifications:admin and org:admin", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    const tags: string[] = (await me(member.token)).tags;
    expect(sorted(tags)).toEqual(sorted(MEMBER_TAGS));
    for (const tag of ADMIN_TAGS) expect(tags).not.toContain(tag);
  });

  it("a viewer holds exactly the read tags plus settings and notifications read/write", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    const body = await me(viewer.token);
    expect(sorted(body.tags)).toEqual(sorted(VIEWER_TAGS));
    expect(body.organizations).toEqual([{ id: t.orgId, name: `org ${t.email}`, role: "viewer" }]);
  });
});
