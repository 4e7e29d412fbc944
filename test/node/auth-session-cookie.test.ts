/**
 * The session cookie on the Node adapter as an operator runs it: its name and
 * attributes per origin (plain-HTTP loopback gets `wsp_session` without Secure,
 * unless PUBLIC_URL says the browser is on HTTPS behind a proxy), PUBLIC_URL's
 * origin accepted by the same-origin check, and the per-client sign-in limit
 * keyed by the connection's peer (an IPv6 client by its /64), or behind
 * TRUSTED_PROXIES by the client X-Forwarded-For names.
 *
 * Two instances: `app` with PUBLIC_URL (https) and no trusted proxies, `proxied`
 * without PUBLIC_URL and with loopback as its trusted proxy.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { createApp } from "../../functions/app";
import { LOGIN_LIMITS } from "../../functions/auth/limits";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { createNodeServices, type NodeServices } from "../../functions/self-hosted/services";
import { isPlainLoopback, sameOriginOrSafe, sessionCookieName } from "../../shared/auth/session";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { newId } from "../../shared/ids";
import { silentLogger } from "../../shared/http/logger";
import { createSmtpMailer } from "../../shared/outbound/smtp";
import { expectProblem, expectStatus, seedTenant, type Harness } from "../support/harness";
import { startSmtpReceiver, type SmtpReceiver } from "../support/receivers";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const PUBLIC_URL = "https://console.example.test";

type App = ReturnType<typeof createApp>;

interface Instance {
  database: PgliteDatabase;
  node: NodeServices;
  dataDir: string;
  app: App;
}

let smtp: SmtpReceiver;
let mailer: ReturnType<typeof createSmtpMailer>;
let main: Instance;
let behindProxy: Instance;
let app: App;
let proxied: App;

async function instance(env: Record<string, string>): Promise<Instance> {
  const database = await openPglite({ loadDataDir: new Blob([readFileSync(inject("pgliteDump"))]), migrate: false });
  const dataDir = mkdtempSync(join(tmpdir(), "ws-auth-"));
  const config = loadNodeConfig({ DATA_DIR: dataDir, SECRET_KEYS: TEST_SECRET_KEYS, RUNNER: "off", ...env });
  const node = await createNodeServices(config, database, await createKeyring(TEST_SECRET_KEYS), silentLogger, { mailer, wakeDeliveries: () => {} });
  return { database, node, dataDir, app: createApp({ services: () => node.services, logger: silentLogger, extraRouters: node.extraRouters }) };
}

async function closeInstance(i: Instance | undefined) {
  await i?.node.close();
  await i?.database.close();
  if (i) rmSync(i.dataDir, { recursive: true, force: true });
}

beforeAll(async () => {
  smtp = await startSmtpReceiver();
  mailer = createSmtpMailer({ url: smtp.url, from: "Workspace <sign-in@workspace.test>" });
  main = await instance({ PUBLIC_URL });
  behindProxy = await instance({ TRUSTED_PROXIES: "127.0.0.0/8,::1/128" });
  app = main.app;
  proxied = behindProxy.app;
});

afterAll(async () => {
  await closeInstance(main);
  await closeInstance(behindProxy);
  mailer?.close();
  await smtp?.close();
});

type CallInit = { json?: unknown; headers?: Record<string, string>; method?: string; peer?: string };

/** A request to `origin` as the Node listener hands it over, from the peer `peer`. */
function call(origin: string, path: string, init: CallInit = {}) {
  return callApp(app, origin, path, init);
}

function callApp(app: App, origin: string, path: string, init: CallInit = {}) {
  const headers = new Headers(init.headers);
  if (init.json !== undefined) headers.set("content-type", "application/json");
  const request = new Request(`${origin}${path}`, {
    method: init.method ?? (init.json !== undefined ? "POST" : "GET"),
    headers,
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  return app.fetch(request, { incoming: { socket: { remoteAddress: init.peer ?? "127.0.0.1" } } });
}

const seed = (i: Instance = main) => seedTenant({ db: i.database.db } as Harness);

describe("cookie name and attributes", () => {
  it("knows plain-HTTP loopback origins", () => {
    for (const url of ["http://127.0.0.1:8787/", "http://localhost:8787/", "http://[::1]:8787/"]) expect(isPlainLoopback(new URL(url)), url).toBe(true);
    for (const url of ["https://127.0.0.1/", "https://localhost/", "http://10.0.0.2/", "http://example.com/", "http://127.0.0.2/"]) {
      expect(isPlainLoopback(new URL(url)), url).toBe(false);
    }
    expect(sessionCookieName("http://localhost:3000/api")).toBe("wsp_session");
    expect(sessionCookieName("https://app.example.com/api")).toBe("__Host-wsp_session");
  });

  it("without PUBLIC_URL, sets wsp_session without Secure on http://127.0.0.1, and the cookie works there only under that name", async () => {
    const t = await seed(behindProxy);
    for (const origin of ["http://127.0.0.1:8787", "http://localhost:8787", "http://[::1]:8787"]) {
      const res = await callApp(proxied, origin, "/api/auth/token", { json: { token: t.token } });
      await expectStatus(res, 200);
      const setCookie = res.headers.get("set-cookie")!;
      expect(setCookie, origin).toMatch(/^wsp_session=wss_[A-Za-z0-9_-]{43}; Max-Age=604800; Path=\/; HttpOnly; SameSite=Lax$/);
      const cookie = setCookie.split(";")[0]!;
      expect((await expectStatus(await callApp(proxied, origin, "/api/me", { headers: { cookie } }), 200)).user.id).toBe(t.userId);
      // The same value under the __Host- name is not read on a loopback origin, nor the plain name elsewhere.
      await expectProblem(await callApp(proxied, origin, "/api/me", { headers: { cookie: `__Host-${cookie}` } }), 401);
      await expectProblem(await callApp(proxied, "https://console.example.test", "/api/me", { headers: { cookie } }), 401);
    }
    const secure = await callApp(proxied, "https://127.0.0.1:8443", "/api/auth/token", { json: { token: t.token } });
    expect(secure.headers.get("set-cookie")).toMatch(/^__Host-wsp_session=wss_[^;]+; Max-Age=604800; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
  });

  it("with an https PUBLIC_URL, sets __Host-wsp_session with Secure even when the proxy rewrote Host to 127.0.0.1:PORT", async () => {
    const t = await seed();
    expect(sessionCookieName("http://127.0.0.1:8787/api", PUBLIC_URL)).toBe("__Host-wsp_session");
    expect(sessionCookieName("https://app.example.com/api", "http://localhost:8787")).toBe("wsp_session");
    const res = await call("http://127.0.0.1:8787", "/api/auth/token", { json: { token: t.token } });
    await expectStatus(res, 200);
    const setCookie = res.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/^__Host-wsp_session=wss_[A-Za-z0-9_-]{43}; Max-Age=604800; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
    const cookie = setCookie.split(";")[0]!;
    // Read under PUBLIC_URL's name whatever Host the proxy sent; the plain name is not.
    expect((await expectStatus(await call("http://127.0.0.1:8787", "/api/me", { headers: { cookie } }), 200)).user.id).toBe(t.userId);
    expect((await expectStatus(await call(PUBLIC_URL, "/api/me", { headers: { cookie } }), 200)).user.id).toBe(t.userId);
    await expectProblem(await call("http://127.0.0.1:8787", "/api/me", { headers: { cookie: cookie.replace(/^__Host-/, "") } }), 401);
    // Logging out clears it under the same name, with Secure.
    const out = await call("http://127.0.0.1:8787", "/api/auth/logout", { method: "POST", headers: { cookie, origin: PUBLIC_URL } });
    await expectStatus(out, 204);
    expect(out.headers.get("set-cookie")).toMatch(/^__Host-wsp_session=; Max-Age=0; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
  });
});

describe("same-origin check", () => {
  it("accepts the request URL's origin and PUBLIC_URL's, nothing else", async () => {
    expect(sameOriginOrSafe("POST", "https://a.example", "https://a.example/api/x", undefined)).toBe(true);
    expect(sameOriginOrSafe("DELETE", "https://a.example", "https://a.example:444/api/x", undefined)).toBe(false);
    expect(sameOriginOrSafe("GET", undefined, "https://a.example/api/x", undefined)).toBe(true);
    expect(sameOriginOrSafe("PATCH", undefined, "https://a.example/api/x", undefined)).toBe(false);

    const t = await seed();
    // Behind a proxy the app sees its loopback URL while the browser's Origin is PUBLIC_URL's.
    const signIn = await call("http://127.0.0.1:8787", "/api/auth/token", { json: { token: t.token } });
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const mint = (origin: string) => call("http://127.0.0.1:8787", "/api/tokens", { json: { name: "x" }, headers: { cookie, origin } });
    await expectStatus(await mint(PUBLIC_URL), 201);
    await expectStatus(await mint("http://127.0.0.1:8787"), 201);
    await expectProblem(await mint("https://evil.example"), 403);
    await expectProblem(await mint("http://localhost:8787"), 403);
  });
});

describe("per-client sign-in limit", () => {
  it(`refuses codes past ${LOGIN_LIMITS.perClient.max} an hour from one peer, counting an IPv6 /64 as one`, async () => {
    const login = (peer: string) => call("http://127.0.0.1:8787", "/api/auth/login", { json: { email: `${newId("p")}@example.test` }, peer });
    for (let i = 0; i < LOGIN_LIMITS.perClient.max; i++) await expectStatus(await login(`2001:db8:1:2::${(i + 1).toString(16)}`), 202);
    const refused = await login("2001:db8:1:2:ffff::9");
    await expectProblem(refused, 429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3000);
    // Another network is not affected, and a CF-Connecting-IP header is not believed on the Node adapter.
    await expectStatus(await login("2001:db8:1:3::1"), 202);
    for (let i = 0; i < LOGIN_LIMITS.perClient.max; i++) await expectStatus(await login(`192.0.2.${i + 1}`), 202);
    const spoofed = await call("http://127.0.0.1:8787", "/api/auth/login", {
      json: { email: `${newId("p")}@example.test` },
      peer: "2001:db8:1:2::77",
      headers: { "cf-connecting-ip": "192.0.2.200" },
    });
    await expectProblem(spoofed, 429);
  });

  it("behind TRUSTED_PROXIES, keys the limit by the client X-Forwarded-For names; without them the header is ignored", async () => {
    const login = (target: App, forwardedFor: string, peer = "127.0.0.1") =>
      callApp(target, "http://127.0.0.1:8787", "/api/auth/login", {
        json: { email: `${newId("x")}@example.test` },
        peer,
        headers: { "x-forwarded-for": forwardedFor },
      });
    // Trusted loopback proxy: each forwarded client has its own budget.
    for (let i = 0; i < LOGIN_LIMITS.perClient.max; i++) await expectStatus(await login(proxied, "203.0.113.1"), 202);
    await expectProblem(await login(proxied, "203.0.113.1"), 429);
    // The header read from the right: the client is the last address that is not a trusted proxy.
    await expectProblem(await login(proxied, "198.51.100.66, 203.0.113.1, 127.0.0.1"), 429);
    await expectStatus(await login(proxied, "203.0.113.2"), 202);
    await expectStatus(await login(proxied, "203.0.113.1, 203.0.113.3", "::1"), 202);
    // A peer that is not a trusted proxy is keyed by itself, whatever it forwards.
    for (let i = 0; i < LOGIN_LIMITS.perClient.max; i++) await expectStatus(await login(proxied, `203.0.113.${100 + i}`, "192.0.2.50"), 202);
    await expectProblem(await login(proxied, "203.0.113.200", "192.0.2.50"), 429);

    // Without TRUSTED_PROXIES every client behind the proxy shares its address: the header changes nothing.
    for (let i = 0; i < LOGIN_LIMITS.perClient.max; i++) await expectStatus(await login(app, `203.0.113.${i + 1}`), 202);
    await expectProblem(await login(app, "203.0.113.250"), 429);
  });

  it("mails the code over SMTP to an address with an account only", async () => {
    const t = await seed();
    await expectStatus(await call("http://127.0.0.1:8787", "/api/auth/login", { json: { email: t.email }, peer: "198.51.100.7" }), 202);
    const deadline = Date.now() + 5000;
    while (!smtp.messages.some((m) => m.to.includes(t.email)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    const mail = smtp.messages.find((m) => m.to.includes(t.email))!;
    expect(mail.subject).toMatch(/^Sign-in code: [0-9]{6}$/);
    expect(smtp.messages.every((m) => m.to.every((to) => to === t.email))).toBe(true);
  });
});
