/** Identity (functions/identity/tokens.ts): GET, POST and DELETE /api/tokens, scopes and expiry. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CreatedTokenSchema } from "../../../functions/identity/tokens";
import { apiTokens } from "../../../shared/db/schema";
import { TAGS } from "../../../shared/auth/permissions";
import { newId } from "../../../shared/ids";
import { storedIn, expectBody, expectProblem, expectStatus, seedMember, seedTenant, seedToken } from "../../support/harness";
import { identityHelpers, problemBody, sha256Hex, sorted, TokenPage } from "../../support/identity";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { me, createToken, removeMember, invite, freshEmail } = identityHelpers(h);

describe("identity: tokens", () => {
  it("creates a token shown once and lists it without the secret", async () => {
    const t = await seedTenant(h);
    const created = await expectBody(await createToken(t.token, { name: "ci" }), 201, CreatedTokenSchema);
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
    const created = await expectBody(await createToken(t.token, { name: "hash check" }), 201, CreatedTokenSchema);
    expect(await storedIn(h, created.token)).toEqual([]);
    // Not even the random part without its prefix.
    expect(await storedIn(h, created.token.slice(4))).toEqual([]);
    expect(await storedIn(h, await sha256Hex(created.token))).not.toEqual([]);
  });

  it("refuses scopes beyond the caller's effective tags", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    const p = await expectProblem(await createToken(member.token, { name: "x", scopes: ["settings:read", "org:admin"] }), 400, "scopes");
    expect(p.detail).toContain("org:admin");
    // Within the member's tags it works.
    const ok = await expectBody(await createToken(member.token, { name: "x", scopes: ["settings:read"] }), 201, CreatedTokenSchema);
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
    const created = await expectBody(await createToken(t.token, { name: "x", expiresAt: future.toISOString() }), 201, CreatedTokenSchema);
    expect(new Date(created.expiresAt!).getTime()).toBe(future.getTime());
    expect((await me(created.token)).user.id).toBe(t.userId);
  });

  it("omitted scopes inherit the calling token's, and a scoped token cannot mint a broader one", async () => {
    const t = await seedTenant(h);
    const scoped = await seedToken(h, t.userId, { scopes: ["settings:read", "project:list", "token:manage"] });
    const child = await expectBody(await createToken(scoped.token, { name: "child" }), 201, CreatedTokenSchema);
    expect(sorted(child.scopes!)).toEqual(["project:list", "settings:read", "token:manage"]);
    expect(sorted((await me(child.token)).tags)).toEqual(["project:list", "settings:read", "token:manage"]);
    await expectProblem(await createToken(scoped.token, { name: "broader", scopes: ["settings:write"] }), 400, "scopes");
    await expectProblem(await createToken(child.token, { name: "broader", scopes: ["org:admin"] }), 400, "scopes");
    // An unscoped token mints an unscoped one.
    expect((await expectBody(await createToken(t.token, { name: "full" }), 201, CreatedTokenSchema)).scopes).toBeNull();
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
    const victim = await expectBody(await createToken(t.token, { name: "to revoke" }), 201, CreatedTokenSchema);
    await me(victim.token);
    await expectStatus(await h.request(`/api/tokens/${victim.id}`, { method: "DELETE", token: t.token }), 204);
    await expectProblem(await h.request("/api/me", { token: victim.token }), 401);
    const list = await expectBody(await h.request("/api/tokens?limit=100", { token: t.token }), 200, TokenPage);
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
    const omitted = await expectBody(await createToken(parent.token, { name: "no expiry asked" }), 201, CreatedTokenSchema);
    expect(new Date(omitted.expiresAt!).getTime()).toBe(parentExpiry.getTime());
    const later = await expectStatus(
      await createToken(parent.token, { name: "a year asked", expiresAt: new Date(Date.now() + 365 * 86400_000).toISOString() }),
      201,
    );
    expect(new Date(later.expiresAt).getTime()).toBe(parentExpiry.getTime());
    const earlier = new Date(Date.now() + 60_000);
    const shorter = await expectBody(await createToken(parent.token, { name: "shorter", expiresAt: earlier.toISOString() }), 201, CreatedTokenSchema);
    expect(new Date(shorter.expiresAt!).getTime()).toBe(earlier.getTime());
    // The list reports the effective expiry, and a grandchild is capped as well.
    const list = await expectBody(await h.request("/api/tokens?limit=100", { token: t.token }), 200, TokenPage);
    expect(list.items.find((i: { id: string }) => i.id === later.id)!.expiresAt).toBe(later.expiresAt);
    const grandchild = await expectBody(await createToken(shorter.token, { name: "grandchild" }), 201, CreatedTokenSchema);
    expect(new Date(grandchild.expiresAt!).getTime()).toBe(earlier.getTime());
  });

  it("a child of a non-expiring token keeps the expiry it asked for, or none", async () => {
    const t = await seedTenant(h);
    const wanted = new Date(Date.now() + 365 * 86400_000);
    const child = await expectBody(await createToken(t.token, { name: "a year", expiresAt: wanted.toISOString() }), 201, CreatedTokenSchema);
    expect(new Date(child.expiresAt!).getTime()).toBe(wanted.getTime());
    const forever = await expectBody(await createToken(t.token, { name: "forever" }), 201, CreatedTokenSchema);
    expect(forever.expiresAt).toBeNull();
    // Its own child is capped at its expiry in turn.
    const grandchild = await expectBody(await createToken(child.token, { name: "grandchild" }), 201, CreatedTokenSchema);
    expect(new Date(grandchild.expiresAt!).getTime()).toBe(wanted.getTime());
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
    await expectBody(await h.request("/api/tokens", { token: viewer.token }), 200, TokenPage);
  });

  it("a token scoped with token:manage lists, mints and revokes the user's tokens", async () => {
    const t = await seedTenant(h);
    const manager = await seedToken(h, t.userId, { scopes: ["token:manage"] });
    const victim = await seedToken(h, t.userId);
    const list = await expectBody(await h.request("/api/tokens?limit=100", { token: manager.token }), 200, TokenPage);
    expect(list.items.map((i: { id: string }) => i.id)).toEqual(expect.arrayContaining([manager.id, victim.id]));
    const child = await expectBody(await createToken(manager.token, { name: "child" }), 201, CreatedTokenSchema);
    expect(child.scopes).toEqual(["token:manage"]);
    // Still no broader than itself.
    await expectProblem(await createToken(manager.token, { name: "broader", scopes: ["settings:read"] }), 400, "scopes");
    await expectStatus(await h.request(`/api/tokens/${victim.id}`, { method: "DELETE", token: manager.token }), 204);
    await expectProblem(await h.request("/api/me", { token: victim.token }), 401);
    // An unscoped token may grant it.
    const granted = await expectBody(await createToken(t.token, { name: "granted", scopes: ["settings:read", "token:manage"] }), 201, CreatedTokenSchema);
    expect(sorted(granted.scopes!)).toEqual(["settings:read", "token:manage"]);
  });

  it("revoking a token does not revoke the tokens it minted", async () => {
    const t = await seedTenant(h);
    const parent = await seedToken(h, t.userId);
    const child = await expectBody(await createToken(parent.token, { name: "child" }), 201, CreatedTokenSchema);
    await expectStatus(await h.request(`/api/tokens/${parent.id}`, { method: "DELETE", token: t.token }), 204);
    await expectProblem(await h.request("/api/me", { token: parent.token }), 401);
    expect((await me(child.token)).user.id).toBe(t.userId);
    const list = await expectBody(await h.request("/api/tokens?limit=100", { token: t.token }), 200, TokenPage);
    expect(list.items.map((i: { id: string }) => i.id)).toContain(child.id);
  });

  it("a user in no organization still manages their tokens, within their token's scopes", async () => {
    const t = await seedTenant(h);
    const m = await seedMember(h, t.orgId, "member");
    const narrow = await seedToken(h, m.userId, { scopes: ["settings:read"] });
    const spare = await seedToken(h, m.userId);
    await expectStatus(await removeMember(t.token, t.orgId, m.userId), 204);
    expect((await me(m.token)).activeOrganizationId).toBeNull();
    await expectBody(await h.request("/api/tokens", { token: m.token }), 200, TokenPage);
    const child = await expectBody(await createToken(m.token, { name: "child", scopes: ["token:manage"] }), 201, CreatedTokenSchema);
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
