/** The cookie at work: CSRF, sessions list/revoke/logout, demotion and removal at once, token sign-in (self-hosted only). */
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { SignedInSchema } from "../../../functions/auth/schema";
import { revokePersonalToken } from "../../../functions/identity/store";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant, seedToken } from "../../support/harness";
import { useNotificationsEnv } from "../../support/notifications-env";
import { sessionCookieOf, signInByCode, withCookie } from "./session-client";

const { h, env } = useNotificationsEnv();

const newToken = (cookie: string, origin?: string | null) => withCookie(cookie, { method: "POST", json: { name: "from the console" }, origin });

describe("CSRF", () => {
  it("refuses a state-changing cookie request without Origin or from a foreign one, and takes it from the app's own", async () => {
    const t = await seedTenant(h);
    const cookie = await signInByCode(h, env, t.email);
    const none = await expectProblem(await h.request("/api/tokens", newToken(cookie, null)), 403);
    expect(none.detail).toMatch(/Origin/);
    await expectProblem(await h.request("/api/tokens", newToken(cookie, "https://evil.example")), 403);
    await expectProblem(await h.request("/api/tokens", newToken(cookie, "http://workspace.test:8080")), 403);
    await expectProblem(await h.request("/api/tokens", newToken(cookie, "null")), 403);
    await expectStatus(await h.request("/api/tokens", newToken(cookie)), 201);
    // Safe methods need no Origin; a bearer token needs none on any method.
    await expectStatus(await h.request("/api/tokens", withCookie(cookie, { origin: null })), 200);
    await expectStatus(await h.request("/api/tokens", { token: t.token, json: { name: "cli" } }), 201);
  });
});

describe("sessions", () => {
  it("lists the user's sessions with the current one marked, revokes one, and logs out", async () => {
    const t = await seedTenant(h);
    const first = await signInByCode(h, env, t.email);
    const second = await signInByCode(h, env, t.email);
    const list = await expectStatus(await h.request("/api/auth/sessions", withCookie(second)), 200);
    expect(list.items).toHaveLength(2);
    const current = list.items.filter((s: { current: boolean }) => s.current);
    expect(current).toHaveLength(1);
    const other = list.items.find((s: { current: boolean }) => !s.current);
    expect(Object.keys(other).sort()).toEqual(["createdAt", "current", "expiresAt", "id", "idleExpiresAt", "lastSeenAt", "signedInWith", "userAgent"]);
    // With a bearer token none is current.
    const viaToken = await expectStatus(await h.request("/api/auth/sessions", { token: t.token }), 200);
    expect(viaToken.items.every((s: { current: boolean }) => !s.current)).toBe(true);

    // Another user cannot see or end them.
    const stranger = await seedTenant(h);
    await expectProblem(await h.request(`/api/auth/sessions/${other.id}`, { method: "DELETE", token: stranger.token }), 404);
    expect((await expectStatus(await h.request("/api/auth/sessions", { token: stranger.token }), 200)).items).toHaveLength(0);

    await expectStatus(await h.request(`/api/auth/sessions/${other.id}`, withCookie(second, { method: "DELETE" })), 204);
    const revoked = await h.request("/api/me", withCookie(first));
    await expectProblem(revoked, 401);
    expect(revoked.headers.get("set-cookie")).toMatch(/^__Host-wsp_session=; Max-Age=0/);
    await expectStatus(await h.request("/api/me", withCookie(second)), 200);

    const out = await h.request("/api/auth/logout", withCookie(second, { method: "POST" }));
    await expectStatus(out, 204);
    expect(out.headers.get("set-cookie")).toMatch(/^__Host-wsp_session=; Max-Age=0; Path=\/;.*Secure/);
    await expectProblem(await h.request("/api/me", withCookie(second)), 401);
    // Logout needs the same-origin check like any state-changing request.
    const third = await signInByCode(h, env, t.email);
    await expectProblem(await h.request("/api/auth/logout", withCookie(third, { method: "POST", origin: "https://evil.example" })), 403);
    await expectStatus(await h.request("/api/me", withCookie(third)), 200);
  });

  it("a scoped token without token:manage cannot see the sessions", async () => {
    const t = await seedTenant(h, { scopes: ["project:read"] });
    await expectProblem(await h.request("/api/auth/sessions", { token: t.token }), 403);
  });

  it("ends a session past its idle or absolute expiry", async () => {
    const t = await seedTenant(h);
    const idle = await signInByCode(h, env, t.email);
    const old = await signInByCode(h, env, t.email);
    const rows = await h.db.execute(sql`select id from sessions where user_id = ${t.userId} order by id`);
    const ids = ((rows as unknown as { rows?: { id: string }[] }).rows ?? (rows as unknown as { id: string }[])).map((r) => r.id);
    await h.db.execute(sql`update sessions set last_seen_at = now() - interval '12 hours 1 second' where id = ${ids[0]!}`);
    await h.db.execute(sql`update sessions set expires_at = now() - interval '1 second' where id = ${ids[1]!}`);
    await expectProblem(await h.request("/api/me", withCookie(idle)), 401);
    await expectProblem(await h.request("/api/me", withCookie(old)), 401);
  });

  it("refreshes last-seen on use at most once a minute", async () => {
    const t = await seedTenant(h);
    const cookie = await signInByCode(h, env, t.email);
    await h.db.execute(sql`update sessions set last_seen_at = now() - interval '11 hours' where user_id = ${t.userId}`);
    await expectStatus(await h.request("/api/me", withCookie(cookie)), 200);
    const list = await expectStatus(await h.request("/api/auth/sessions", withCookie(cookie)), 200);
    expect(Date.now() - Date.parse(list.items[0].lastSeenAt)).toBeLessThan(60_000);
  });
});

describe("tokens minted with the cookie", () => {
  it("never outlive the session they were minted with, and outlive its logout until their own expiry", async () => {
    const t = await seedTenant(h);
    const cookie = await signInByCode(h, env, t.email);
    const session = (await expectStatus(await h.request("/api/auth/sessions", withCookie(cookie)), 200)).items[0];
    const sessionEnd = Date.parse(session.expiresAt);
    const mint = (json: Record<string, unknown>) => h.request("/api/tokens", withCookie(cookie, { method: "POST", json: { name: "console", ...json } }));
    // No expiry asked for: the session's absolute expiry, not "never".
    const open = await expectStatus(await mint({}), 201);
    expect(open.expiresAt).not.toBeNull();
    expect(Date.parse(open.expiresAt)).toBe(sessionEnd);
    // Later than the session: capped; sooner: kept.
    const late = await expectStatus(await mint({ expiresAt: new Date(Date.now() + 30 * 24 * 3600_000).toISOString() }), 201);
    expect(Date.parse(late.expiresAt)).toBe(sessionEnd);
    const soonAt = new Date(Date.now() + 3600_000).toISOString();
    const soon = await expectStatus(await mint({ expiresAt: soonAt }), 201);
    expect(Date.parse(soon.expiresAt)).toBe(Date.parse(soonAt));
    // And a token minted by that token is capped in turn.
    const child = await expectStatus(await h.request("/api/tokens", { token: open.token, json: { name: "child" } }), 201);
    expect(Date.parse(child.expiresAt)).toBe(sessionEnd);

    // Logout ends the session, not what it minted (as revoking a token does not revoke its children).
    await expectStatus(await h.request("/api/auth/logout", withCookie(cookie, { method: "POST" })), 204);
    await expectProblem(await h.request("/api/me", withCookie(cookie)), 401);
    expect((await expectStatus(await h.request("/api/me", { token: open.token }), 200)).user.id).toBe(t.userId);
  });

  it("from a session opened with a token that never expires, are capped at the session's 7 days (self-hosted)", async ({ skip }) => {
    if (h.runtime === "worker") skip();
    const t = await seedTenant(h);
    const res = await h.request("/api/auth/token", { json: { token: t.token } });
    const body = await expectBody(res, 200, SignedInSchema);
    const minted = await expectStatus(await h.request("/api/tokens", withCookie(sessionCookieOf(res), { method: "POST", json: { name: "console" } })), 201);
    expect(Date.parse(minted.expiresAt)).toBe(Date.parse(body.session.expiresAt));
  });
});

describe("roles", () => {
  it("a demotion or removal holds at once for the cookie", async () => {
    const owner = await seedTenant(h);
    const admin = await seedMember(h, owner.orgId, "admin");
    const cookie = await signInByCode(h, env, admin.email);
    const invite = (email: string) => withCookie(cookie, { method: "POST", org: owner.orgId, json: { email, role: "viewer" } });
    await expectStatus(await h.request(`/api/orgs/${owner.orgId}/invitations`, invite("one@example.test")), 201);

    await expectStatus(
      await h.request(`/api/orgs/${owner.orgId}/members/${admin.userId}`, { method: "PATCH", token: owner.token, json: { role: "member" } }),
      200,
    );
    await expectProblem(await h.request(`/api/orgs/${owner.orgId}/invitations`, invite("two@example.test")), 403);
    const me = await expectStatus(await h.request("/api/me", withCookie(cookie, { org: owner.orgId })), 200);
    expect(me.tags).not.toContain("org:admin");

    await expectStatus(await h.request(`/api/orgs/${owner.orgId}/members/${admin.userId}`, { method: "DELETE", token: owner.token }), 204);
    await expectProblem(await h.request(`/api/orgs/${owner.orgId}/invitations`, invite("three@example.test")), 403);
    await expectProblem(await h.request("/api/settings", withCookie(cookie, { org: owner.orgId })), 403);
  });
});

describe("sign-in by token", () => {
  it("is self-hosted only: the Worker has no such route", async ({ skip }) => {
    if (h.runtime !== "worker") skip();
    const t = await seedTenant(h);
    await expectProblem(await h.request("/api/auth/token", { json: { token: t.token } }), 404);
  });

  it("opens a session for the token's user that ends with the token", async ({ skip }) => {
    if (h.runtime === "worker") skip();
    const t = await seedTenant(h);
    const extra = await seedToken(h, t.userId, { expiresAt: new Date(Date.now() + 3600_000) });
    const res = await h.request("/api/auth/token", { json: { token: extra.token } });
    const body = await expectBody(res, 200, SignedInSchema);
    expect(body.user.id).toBe(t.userId);
    expect(body.session.signedInWith).toBe("token");
    // Capped at the token's expiry.
    expect(Date.parse(body.session.expiresAt)).toBeLessThanOrEqual(Date.now() + 3600_000);
    expect(res.headers.get("set-cookie")).toMatch(/^__Host-wsp_session=wss_.*; Secure/);
    const cookie = sessionCookieOf(res);
    const me = await expectStatus(await h.request("/api/me", withCookie(cookie)), 200);
    expect(me.user.id).toBe(t.userId);

    await revokePersonalToken(h.db, t.userId, extra.id, new Date());
    await expectProblem(await h.request("/api/me", withCookie(cookie)), 401);
  });

  it("refuses a scoped, revoked or unknown token naming `token`", async ({ skip }) => {
    if (h.runtime === "worker") skip();
    const t = await seedTenant(h);
    const scoped = await seedToken(h, t.userId, { scopes: ["project:read"] });
    await expectProblem(await h.request("/api/auth/token", { json: { token: scoped.token } }), 400, "token");
    const revoked = await seedToken(h, t.userId);
    await revokePersonalToken(h.db, t.userId, revoked.id, new Date());
    await expectProblem(await h.request("/api/auth/token", { json: { token: revoked.token } }), 400, "token");
    await expectProblem(await h.request("/api/auth/token", { json: { token: "wsp_nope" } }), 400, "token");
  });
});
