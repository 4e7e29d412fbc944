/** Identity: the caller, organizations, roles, tokens, members and invitations. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { apiTokens } from "../../../shared/db/schema";
import { ROLES, TAGS, type Tag } from "../../../shared/auth/permissions";
import { newId } from "../../../shared/ids";
import { dumpAllTables, expectProblem, expectStatus, seedMember, seedTenant, seedToken } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const ADMIN_TAGS: Tag[] = ["project:admin", "notifications:admin", "org:admin"];
const MEMBER_TAGS = TAGS.filter((t) => !ADMIN_TAGS.includes(t));
const VIEWER_TAGS = [
  "project:list",
  "project:read",
  "project:deployment:list",
  "settings:read",
  "settings:write",
  "notifications:read",
  "notifications:write",
  "token:manage",
];

const sorted = <T>(values: readonly T[]) => [...values].sort();

/** Computed here, independently of the app's own helper. */
async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A problem without its per-request id, for byte-for-byte comparisons. */
async function problemBody(res: Response, status: number) {
  const p = await expectProblem(res, status);
  const { requestId, ...rest } = p;
  expect(requestId).toMatch(/^req_/);
  return rest;
}

const h = useRuntimeHarness();
describe("identity", () => {
  const me = async (token: string, org?: string) => expectStatus(await h.request("/api/me", { token, org }), 200);
  const createOrg = async (token: string, name: string) =>
    expectStatus<{ id: string; name: string; role: string }>(await h.request("/api/orgs", { token, json: { name } }), 201);
  const createToken = (token: string, json: unknown, org?: string) => h.request("/api/tokens", { token, json, org });
  const members = (token: string, orgId: string, query = "") => h.request(`/api/orgs/${orgId}/members${query}`, { token });
  const setRole = (token: string, orgId: string, userId: string, role: unknown) =>
    h.request(`/api/orgs/${orgId}/members/${userId}`, { method: "PATCH", token, json: { role } });
  const removeMember = (token: string, orgId: string, userId: string) => h.request(`/api/orgs/${orgId}/members/${userId}`, { method: "DELETE", token });
  const invite = (token: string, orgId: string, email: string, role: string) => h.request(`/api/orgs/${orgId}/invitations`, { token, json: { email, role } });
  const accept = (json: unknown, token?: string) => h.request("/api/invitations/accept", { token, json });
  const freshEmail = () => `${newId("inv")}@example.test`;
  const allMembers = async (token: string, orgId: string) =>
    (await expectStatus<{ items: Array<{ userId: string; role: string }> }>(await members(token, orgId, "?limit=100"), 200)).items;

  describe("GET /api/me", () => {
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

  describe("POST /api/orgs", () => {
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

  describe("roles", () => {
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

  describe("tokens", () => {
    it("creates a token shown once and lists it without the secret", async () => {
      const t = await seedTenant(h);
      const created = await expectStatus(await createToken(t.token, { name: "ci" }), 201);
      expect(created.token).toMatch(/^wsp_[A-Za-z0-9_-]+$/);
      expect(created.token.length).toBeGreaterThanOrEqual(43);
      expect(created).toMatchObject({ id: expect.stringMatching(/^tok_/), name: "ci", scopes: null, expiresAt: null });
      expect(created.token.startsWith(created.displayPrefix)).toBe(true);
      expect(created.displayPrefix.length).toBeLessThan(created.token.length - 20);

      // The new token works.
      expect((await me(created.token)).user.id).toBe(t.userId);

      const listText = await (await h.request("/api/tokens?limit=100", { token: t.token })).text();
      expect(listText).not.toContain(created.token);
      const list = JSON.parse(listText);
      const listed = list.items.find((i: { id: string }) => i.id === created.id);
      expect(listed).toEqual({
        id: created.id,
        name: "ci",
        displayPrefix: created.displayPrefix,
        scopes: null,
        expiresAt: null,
        createdAt: created.createdAt,
      });
      for (const item of list.items) expect(item).not.toHaveProperty("token");
    });

    it("stores only the SHA-256 hash of the secret", async () => {
      const t = await seedTenant(h);
      const created = await expectStatus(await createToken(t.token, { name: "hash check" }), 201);
      const dump = await dumpAllTables(h);
      expect(dump).not.toContain(created.token);
      // Not even the random part without its prefix.
      expect(dump).not.toContain(created.token.slice(4));
      expect(dump).toContain(await sha256Hex(created.token));
    });

    it("refuses scopes beyond the caller's effective tags", async () => {
      const t = await seedTenant(h);
      const member = await seedMember(h, t.orgId, "member");
      const p = await expectProblem(await createToken(member.token, { name: "x", scopes: ["settings:read", "org:admin"] }), 400, "scopes");
      expect(p.detail).toContain("org:admin");
      // Within the member's tags it works.
      const ok = await expectStatus(await createToken(member.token, { name: "x", scopes: ["settings:read"] }), 201);
      expect(ok.scopes).toEqual(["settings:read"]);
    });

    it("refuses an unknown tag naming the scopes field", async () => {
      const t = await seedTenant(h);
      const p = await expectProblem(await createToken(t.token, { name: "x", scopes: ["root:everything"] }), 400);
      expect(p.field).toMatch(/^scopes/);
      expect(p.field).toBe("scopes.0");
      expect(p.allowed).toEqual([...TAGS]);
    });

    it("requires expiresAt to be in the future", async () => {
      const t = await seedTenant(h);
      const past = new Date(Date.now() - 60_000).toISOString();
      await expectProblem(await createToken(t.token, { name: "x", expiresAt: past }), 400, "expiresAt");
      await expectProblem(await createToken(t.token, { name: "x", expiresAt: "tomorrow" }), 400, "expiresAt");
      const future = new Date(Date.now() + 3600_000);
      const created = await expectStatus(await createToken(t.token, { name: "x", expiresAt: future.toISOString() }), 201);
      expect(new Date(created.expiresAt).getTime()).toBe(future.getTime());
      expect((await me(created.token)).user.id).toBe(t.userId);
    });

    it("omitted scopes inherit the calling token's, and a scoped token cannot mint a broader one", async () => {
      const t = await seedTenant(h);
      const scoped = await seedToken(h, t.userId, { scopes: ["settings:read", "project:list", "token:manage"] });
      const child = await expectStatus(await createToken(scoped.token, { name: "child" }), 201);
      expect(sorted(child.scopes)).toEqual(["project:list", "settings:read", "token:manage"]);
      expect(sorted((await me(child.token)).tags)).toEqual(["project:list", "settings:read", "token:manage"]);
      await expectProblem(await createToken(scoped.token, { name: "broader", scopes: ["settings:write"] }), 400, "scopes");
      await expectProblem(await createToken(child.token, { name: "broader", scopes: ["org:admin"] }), 400, "scopes");
      // An unscoped token mints an unscoped one.
      expect((await expectStatus(await createToken(t.token, { name: "full" }), 201)).scopes).toBeNull();
    });

    it("effective tags are the role's tags intersected with the token's scopes", async () => {
      const t = await seedTenant(h);
      const readOnly = await seedToken(h, t.userId, { scopes: ["settings:read"] });
      await expectProblem(await h.request("/api/settings/build-mode", { method: "PATCH", token: readOnly.token, json: { buildMode: "local" } }), 403);
      await expectStatus(await h.request("/api/settings", { token: readOnly.token }), 200);

      // A viewer's token scoped to a tag the role lacks does not gain it.
      const viewer = await seedMember(h, t.orgId, "viewer");
      const viewerScoped = await seedToken(h, viewer.userId, { scopes: ["settings:read", "org:admin"] });
      expect((await me(viewerScoped.token)).tags).toEqual(["settings:read"]);
      await expectProblem(await invite(viewerScoped.token, t.orgId, freshEmail(), "member"), 403);
    });

    it("DELETE revokes a token at once", async () => {
      const t = await seedTenant(h);
      const victim = await expectStatus(await createToken(t.token, { name: "to revoke" }), 201);
      await me(victim.token);
      await expectStatus(await h.request(`/api/tokens/${victim.id}`, { method: "DELETE", token: t.token }), 204);
      await expectProblem(await h.request("/api/me", { token: victim.token }), 401);
      const list = await expectStatus(await h.request("/api/tokens?limit=100", { token: t.token }), 200);
      expect(list.items.map((i: { id: string }) => i.id)).not.toContain(victim.id);
      // Revoking twice: not found.
      await expectProblem(await h.request(`/api/tokens/${victim.id}`, { method: "DELETE", token: t.token }), 404);
    });

    it("a token can revoke itself", async () => {
      const t = await seedTenant(h);
      const self = await seedToken(h, t.userId);
      await expectStatus(await h.request(`/api/tokens/${self.id}`, { method: "DELETE", token: self.token }), 204);
      await expectProblem(await h.request("/api/me", { token: self.token }), 401);
      await me(t.token);
    });

    it("another user's token id answers 404 exactly like an unknown id", async () => {
      const t = await seedTenant(h);
      const other = await seedTenant(h);
      const otherToken = await seedToken(h, other.userId);
      const foreign = await problemBody(await h.request(`/api/tokens/${otherToken.id}`, { method: "DELETE", token: t.token }), 404);
      const unknown = await problemBody(await h.request(`/api/tokens/${newId("tok")}`, { method: "DELETE", token: t.token }), 404);
      expect(foreign).toEqual(unknown);
      // The other user's token still works.
      await me(otherToken.token);
    });

    it("a child never outlives its parent: expiresAt is capped at the calling token's expiry", async () => {
      const t = await seedTenant(h);
      const parentExpiry = new Date(Date.now() + 5 * 60_000);
      // The reported case, with the tag that minting now needs: a narrow token expiring in 5 minutes.
      const parent = await seedToken(h, t.userId, { scopes: ["settings:read", "token:manage"], expiresAt: parentExpiry });
      const omitted = await expectStatus(await createToken(parent.token, { name: "no expiry asked" }), 201);
      expect(new Date(omitted.expiresAt).getTime()).toBe(parentExpiry.getTime());
      const later = await expectStatus(
        await createToken(parent.token, { name: "a year asked", expiresAt: new Date(Date.now() + 365 * 86400_000).toISOString() }),
        201,
      );
      expect(new Date(later.expiresAt).getTime()).toBe(parentExpiry.getTime());
      const earlier = new Date(Date.now() + 60_000);
      const shorter = await expectStatus(await createToken(parent.token, { name: "shorter", expiresAt: earlier.toISOString() }), 201);
      expect(new Date(shorter.expiresAt).getTime()).toBe(earlier.getTime());
      // The list reports the effective expiry, and a grandchild is capped as well.
      const list = await expectStatus(await h.request("/api/tokens?limit=100", { token: t.token }), 200);
      expect(list.items.find((i: { id: string }) => i.id === later.id).expiresAt).toBe(later.expiresAt);
      const grandchild = await expectStatus(await createToken(shorter.token, { name: "grandchild" }), 201);
      expect(new Date(grandchild.expiresAt).getTime()).toBe(earlier.getTime());
    });

    it("a child of a non-expiring token keeps the expiry it asked for, or none", async () => {
      const t = await seedTenant(h);
      const wanted = new Date(Date.now() + 365 * 86400_000);
      const child = await expectStatus(await createToken(t.token, { name: "a year", expiresAt: wanted.toISOString() }), 201);
      expect(new Date(child.expiresAt).getTime()).toBe(wanted.getTime());
      const forever = await expectStatus(await createToken(t.token, { name: "forever" }), 201);
      expect(forever.expiresAt).toBeNull();
      // Its own child is capped at its expiry in turn.
      const grandchild = await expectStatus(await createToken(child.token, { name: "grandchild" }), 201);
      expect(new Date(grandchild.expiresAt).getTime()).toBe(wanted.getTime());
    });

    it("a deployment session never outlives the token that created it", async () => {
      const t = await seedTenant(h);
      const project = await expectStatus(await h.request("/api/projects", { token: t.token, json: { name: `proj ${newId("n")}` } }), 201);
      const parentExpiry = new Date(Date.now() + 60_000);
      const parent = await seedToken(h, t.userId, { expiresAt: parentExpiry });
      const s = await expectStatus(await h.request(`/api/projects/${project.id}/deployment-session`, { method: "POST", token: parent.token }), 201);
      expect(new Date(s.expiresAt).getTime()).toBe(parentExpiry.getTime());
      const [row] = await h.db.select({ expiresAt: apiTokens.expiresAt }).from(apiTokens).where(eq(apiTokens.projectId, project.id));
      expect(row!.expiresAt!.getTime()).toBe(parentExpiry.getTime());
      // From a non-expiring token: the usual 15 minutes.
      const full = await expectStatus(await h.request(`/api/projects/${project.id}/deployment-session`, { method: "POST", token: t.token }), 201);
      expect(new Date(full.expiresAt).getTime() - Date.now()).toBeGreaterThan(14 * 60_000);
    });

    it("a token scoped without token:manage can neither list, mint nor revoke tokens", async () => {
      const t = await seedTenant(h);
      const narrow = await seedToken(h, t.userId, { scopes: ["settings:read"] });
      const full = await seedToken(h, t.userId);
      for (const res of [
        await h.request("/api/tokens", { token: narrow.token }),
        await createToken(narrow.token, { name: "child" }),
        await createToken(narrow.token, { name: "child", scopes: ["settings:read"] }),
        await h.request(`/api/tokens/${full.id}`, { method: "DELETE", token: narrow.token }),
        await h.request(`/api/tokens/${narrow.id}`, { method: "DELETE", token: narrow.token }),
      ]) {
        const p = await expectProblem(res, 403);
        expect(p.detail).toContain("token:manage");
      }
      // Nothing was revoked; the narrow token still does what it is for.
      await me(full.token);
      await expectStatus(await h.request("/api/settings", { token: narrow.token }), 200);
      // An unscoped token holds token:manage through its role, whatever the role.
      const viewer = await seedMember(h, t.orgId, "viewer");
      await expectStatus(await h.request("/api/tokens", { token: viewer.token }), 200);
    });

    it("a token scoped with token:manage lists, mints and revokes the user's tokens", async () => {
      const t = await seedTenant(h);
      const manager = await seedToken(h, t.userId, { scopes: ["token:manage"] });
      const victim = await seedToken(h, t.userId);
      const list = await expectStatus(await h.request("/api/tokens?limit=100", { token: manager.token }), 200);
      expect(list.items.map((i: { id: string }) => i.id)).toEqual(expect.arrayContaining([manager.id, victim.id]));
      const child = await expectStatus(await createToken(manager.token, { name: "child" }), 201);
      expect(child.scopes).toEqual(["token:manage"]);
      // Still no broader than itself.
      await expectProblem(await createToken(manager.token, { name: "broader", scopes: ["settings:read"] }), 400, "scopes");
      await expectStatus(await h.request(`/api/tokens/${victim.id}`, { method: "DELETE", token: manager.token }), 204);
      await expectProblem(await h.request("/api/me", { token: victim.token }), 401);
      // An unscoped token may grant it.
      const granted = await expectStatus(await createToken(t.token, { name: "granted", scopes: ["settings:read", "token:manage"] }), 201);
      expect(sorted(granted.scopes)).toEqual(["settings:read", "token:manage"]);
    });

    it("revoking a token does not revoke the tokens it minted", async () => {
      const t = await seedTenant(h);
      const parent = await seedToken(h, t.userId);
      const child = await expectStatus(await createToken(parent.token, { name: "child" }), 201);
      await expectStatus(await h.request(`/api/tokens/${parent.id}`, { method: "DELETE", token: t.token }), 204);
      await expectProblem(await h.request("/api/me", { token: parent.token }), 401);
      expect((await me(child.token)).user.id).toBe(t.userId);
      const list = await expectStatus(await h.request("/api/tokens?limit=100", { token: t.token }), 200);
      expect(list.items.map((i: { id: string }) => i.id)).toContain(child.id);
    });

    it("a user in no organization still manages their tokens, within their token's scopes", async () => {
      const t = await seedTenant(h);
      const m = await seedMember(h, t.orgId, "member");
      const narrow = await seedToken(h, m.userId, { scopes: ["settings:read"] });
      const spare = await seedToken(h, m.userId);
      await expectStatus(await removeMember(t.token, t.orgId, m.userId), 204);
      expect((await me(m.token)).activeOrganizationId).toBeNull();
      await expectStatus(await h.request("/api/tokens", { token: m.token }), 200);
      const child = await expectStatus(await createToken(m.token, { name: "child", scopes: ["token:manage"] }), 201);
      await expectStatus(await h.request(`/api/tokens/${spare.id}`, { method: "DELETE", token: child.token }), 204);
      await expectProblem(await h.request("/api/tokens", { token: narrow.token }), 403);
      await expectProblem(await h.request(`/api/tokens/${narrow.id}`, { method: "DELETE", token: narrow.token }), 403);
    });

    it("an expired token answers 401", async () => {
      const t = await seedTenant(h);
      const expired = await seedToken(h, t.userId, { expiresAt: new Date(Date.now() - 1000) });
      await expectProblem(await h.request("/api/me", { token: expired.token }), 401);
      await expectProblem(await h.request("/api/settings", { token: expired.token }), 401);
    });

    it("a missing or malformed Authorization header answers 401", async () => {
      const t = await seedTenant(h);
      await expectProblem(await h.request("/api/me"), 401);
      for (const authorization of [
        `Basic ${t.token}`,
        t.token,
        "Bearer",
        "Bearer ",
        "Bearer short",
        `Bearer  ${t.token}`,
        `Bearer ${t.token} extra`,
        `bearer-${t.token}`,
      ]) {
        await expectProblem(await h.request("/api/me", { headers: { authorization } }), 401);
      }
      // A well-formed bearer that is not a token.
      await expectProblem(await h.request("/api/me", { token: `wsp_${"A".repeat(43)}` }), 401);
    });
  });

  describe("demotion", () => {
    it("takes effect at once for existing tokens", async () => {
      const t = await seedTenant(h);
      const admin = await seedMember(h, t.orgId, "admin");
      await expectStatus(await invite(admin.token, t.orgId, freshEmail(), "member"), 201);
      const updated = await expectStatus(await setRole(t.token, t.orgId, admin.userId, "viewer"), 200);
      expect(updated).toMatchObject({ userId: admin.userId, role: "viewer" });
      await expectProblem(await invite(admin.token, t.orgId, freshEmail(), "member"), 403);
      expect(sorted((await me(admin.token)).tags)).toEqual(sorted(VIEWER_TAGS));
    });
  });

  describe("members", () => {
    it("lists members with keyset pagination", async () => {
      const t = await seedTenant(h);
      const b = await seedMember(h, t.orgId, "member");
      const c = await seedMember(h, t.orgId, "viewer");
      const expected = [t.userId, b.userId, c.userId].sort();

      const seen: string[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 3; page++) {
        const query: string = `?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
        const body: { items: Array<{ userId: string }>; nextCursor: string | null } = await expectStatus(await members(t.token, t.orgId, query), 200);
        expect(body.items).toHaveLength(1);
        seen.push(body.items[0]!.userId);
        cursor = body.nextCursor;
        if (page < 2) expect(cursor).toEqual(expect.any(String));
        else expect(cursor).toBeNull();
      }
      expect(seen).toEqual(expected);

      const all = await expectStatus(await members(b.token, t.orgId), 200);
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
      const body = await expectStatus(await setRole(t.token, t.orgId, m.userId, "admin"), 200);
      expect(body).toEqual({ userId: m.userId, email: m.email, name: "Test member", role: "admin", joinedAt: expect.any(String) });
      expect(sorted((await me(m.token)).tags)).toEqual(sorted(TAGS));
      await expectStatus(await setRole(t.token, t.orgId, m.userId, "owner"), 200);
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
      await expectStatus(await setRole(t.token, t.orgId, t.userId, "owner"), 200);
      expect((await me(t.token)).organizations[0].role).toBe("owner");

      // With a second owner, one of them may step down.
      const second = await seedMember(h, t.orgId, "owner");
      await expectStatus(await setRole(t.token, t.orgId, t.userId, "admin"), 200);
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
      await expectStatus(await setRole(admin.token, t.orgId, m.userId, "viewer"), 200);
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

  describe("invitations", () => {
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
      const dump = await dumpAllTables(h);
      expect(dump).not.toContain(inv.code);
      expect(dump).toContain(await sha256Hex(inv.code));
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

  describe("concurrency", () => {
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
});
