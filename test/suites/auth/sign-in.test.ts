/** Sign-in by e-mailed code: the mail, the cookie, tries, expiry, the same answer for unknown addresses, the rate limit. */
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { verifyFailureTake } from "../../../functions/auth/limits";
import { SignedInSchema } from "../../../functions/auth/schema";
import { newId } from "../../../shared/ids";
import { storedIn, expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { useNotificationsEnv } from "../../support/notifications-env";
import { codeFor, mailsTo, sessionCookieOf, signInByCode, withCookie } from "./session-client";

const { h, env } = useNotificationsEnv();

describe("sign-in by code", () => {
  it("mails a code, trades it for a Secure __Host- cookie that authenticates like the user's token", async () => {
    const t = await seedTenant(h);
    const login = await h.request("/api/auth/login", { json: { email: t.email.toUpperCase() } });
    const sent = await expectStatus(login, 202);
    expect(sent.expiresInSeconds).toBe(600);
    const code = await codeFor(env, t.email);
    expect(code).toMatch(/^[0-9]{6}$/);

    const res = await h.request("/api/auth/verify", {
      json: { email: t.email, code: `${code.slice(0, 3)} ${code.slice(3)}` },
      headers: { "user-agent": "TestBrowser/1.0" },
    });
    const body = await expectBody(res, 200, SignedInSchema);
    expect(body.user.id).toBe(t.userId);
    expect(body.session).toMatchObject({ current: true, signedInWith: "code", userAgent: "TestBrowser/1.0" });
    expect(Date.parse(body.session.expiresAt) - Date.parse(body.session.createdAt)).toBe(7 * 24 * 3600 * 1000);
    expect(Date.parse(body.session.idleExpiresAt) - Date.parse(body.session.lastSeenAt)).toBe(12 * 3600 * 1000);

    const setCookie = res.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/^__Host-wsp_session=wss_[A-Za-z0-9_-]{43};/);
    const attrs = setCookie.split(";").map((a) => a.trim().toLowerCase());
    expect(attrs).toEqual(expect.arrayContaining(["max-age=604800", "path=/", "httponly", "secure", "samesite=lax"]));
    expect(attrs.some((a) => a.startsWith("domain="))).toBe(false);

    // Neither the code nor the cookie value is stored.
    const secret = sessionCookieOf(res).split("=")[1]!;
    expect(await storedIn(h, secret)).toEqual([]);
    expect(await storedIn(h, `"${code}"`)).toEqual([]);

    const me = await expectStatus(await h.request("/api/me", withCookie(sessionCookieOf(res), { origin: null })), 200);
    expect(me.user.id).toBe(t.userId);
    expect(me.activeOrganizationId).toBe(t.orgId);
    expect(me.tokenScopes).toBeNull();
    expect(me.tags).toContain("org:admin");

    // The code works once.
    await expectProblem(await h.request("/api/auth/verify", { json: { email: t.email, code } }), 400, "code");
  });

  it("answers the same for an address without an account, and sends nothing there", async () => {
    const t = await seedTenant(h);
    const stranger = `${newId("nobody")}@example.test`;
    const known = await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    const unknown = await expectStatus(await h.request("/api/auth/login", { json: { email: stranger } }), 202);
    expect(unknown).toEqual(known);
    await codeFor(env, t.email);
    expect(mailsTo(env, stranger)).toHaveLength(0);

    const wrongKnown = await expectProblem(await h.request("/api/auth/verify", { json: { email: t.email, code: "000000" } }), 400, "code");
    const wrongUnknown = await expectProblem(await h.request("/api/auth/verify", { json: { email: stranger, code: "000000" } }), 400, "code");
    const neverAsked = await expectProblem(await h.request("/api/auth/verify", { json: { email: `${newId("n")}@example.test`, code: "000000" } }), 400, "code");
    expect(wrongUnknown.detail).toBe(wrongKnown.detail);
    expect(neverAsked.detail).toBe(wrongKnown.detail);
  });

  it("burns the code after 5 wrong tries", async () => {
    const t = await seedTenant(h);
    await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    const code = await codeFor(env, t.email);
    const wrong = code === "123456" ? "654321" : "123456";
    for (let i = 0; i < 5; i++) await expectProblem(await h.request("/api/auth/verify", { json: { email: t.email, code: wrong } }), 400, "code");
    await expectProblem(await h.request("/api/auth/verify", { json: { email: t.email, code } }), 400, "code");
  });

  it.runIf(h.realConcurrency)("counts concurrent tries exactly, and a code signs in once however many race", async () => {
    const t = await seedTenant(h);
    await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    const code = await codeFor(env, t.email);
    const wrong = code === "123456" ? "654321" : "123456";
    const guesses = await Promise.all(Array.from({ length: 4 }, () => h.request("/api/auth/verify", { json: { email: t.email, code: wrong } })));
    expect(guesses.map((r) => r.status)).toEqual([400, 400, 400, 400]);
    // One try left: of several right answers racing, exactly one opens a session.
    const rights = await Promise.all(Array.from({ length: 6 }, () => h.request("/api/auth/verify", { json: { email: t.email, code } })));
    expect(rights.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400, 400]);
  });

  it("caps wrong codes per address at 20 in 24 hours: past them even the right code is 429 with Retry-After; successes do not count", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const verify = (email: string, code: string) => h.request("/api/auth/verify", { json: { email, code } });
    await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    const first = await codeFor(env, t.email);
    const wrong = (code: string) => (code === "123456" ? "654321" : "123456");
    // 5 against the live code, then 14 with none left: every failure counts alike.
    for (let i = 0; i < 19; i++) await expectProblem(await verify(t.email, wrong(first)), 400, "code");
    // A sign-in gives its unit back.
    const before = mailsTo(env, t.email).length;
    await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    await expectStatus(await verify(t.email, await codeFor(env, t.email, before)), 200);
    await expectProblem(await verify(t.email, "000000"), 400, "code");

    const last = mailsTo(env, t.email).length;
    await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    const code = await codeFor(env, t.email, last);
    const refused = await verify(t.email, code);
    const body = await expectProblem(refused, 429);
    expect(body.detail).toMatch(/20 wrong codes per e-mail address in 24 hours/);
    const retry = Number(refused.headers.get("retry-after"));
    expect(retry).toBeGreaterThan(23 * 3600);
    expect(retry).toBeLessThanOrEqual(24 * 3600);
    // The code was not tried (it works once the window has passed), and the limit is the address's own.
    const { key } = verifyFailureTake(t.email.toLowerCase());
    await h.db.execute(sql`update rate_limits set window_end = now() - interval '1 second' where key = ${key}`);
    await expectStatus(await verify(t.email, code), 200);
    await expectProblem(await verify(other.email, "000000"), 400, "code");
  });

  it("refuses an expired code", async () => {
    const t = await seedTenant(h);
    await expectStatus(await h.request("/api/auth/login", { json: { email: t.email } }), 202);
    const code = await codeFor(env, t.email);
    await h.db.execute(sql`update sign_in_codes set expires_at = now() - interval '1 second' where email = ${t.email.toLowerCase()}`);
    await expectProblem(await h.request("/api/auth/verify", { json: { email: t.email, code } }), 400, "code");
  });

  it("refuses a malformed code naming `code` and an invalid address naming `email`", async () => {
    await expectProblem(await h.request("/api/auth/verify", { json: { email: "a@example.test", code: "12ab56" } }), 400, "code");
    await expectProblem(await h.request("/api/auth/login", { json: { email: "not an address" } }), 400, "email");
  });

  it("limits codes per address: the 6th in an hour is 429 with Retry-After", async () => {
    const email = `${newId("limited")}@example.test`;
    for (let i = 0; i < 5; i++) await expectStatus(await h.request("/api/auth/login", { json: { email } }), 202);
    const res = await h.request("/api/auth/login", { json: { email: email.toUpperCase() } });
    await expectProblem(res, 429);
    const retry = Number(res.headers.get("retry-after"));
    expect(retry).toBeGreaterThan(3000);
    expect(retry).toBeLessThanOrEqual(3600);
  });

  it("limits codes per client address on the Worker (CF-Connecting-IP)", async ({ skip }) => {
    if (h.runtime !== "worker") skip();
    const ip = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}:${Math.floor(Math.random() * 0xffff).toString(16)}::1`;
    for (let i = 0; i < 30; i++) {
      await expectStatus(await h.request("/api/auth/login", { json: { email: `${newId("c")}@example.test` }, headers: { "cf-connecting-ip": ip } }), 202);
    }
    // Another address in the same /64 counts too.
    const sameNet = ip.replace(/::1$/, "::2");
    const res = await h.request("/api/auth/login", { json: { email: `${newId("c")}@example.test` }, headers: { "cf-connecting-ip": sameNet } });
    await expectProblem(res, 429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("the bearer header wins over the cookie", async () => {
    const a = await seedTenant(h);
    const b = await seedTenant(h);
    const cookie = await signInByCode(h, env, a.email);
    const me = await expectStatus(await h.request("/api/me", withCookie(cookie, { token: b.token })), 200);
    expect(me.user.id).toBe(b.userId);
    // A bad bearer is refused even with a good cookie.
    await expectProblem(await h.request("/api/me", withCookie(cookie, { token: "wsp_not-a-real-token-at-all" })), 401);
  });
});
