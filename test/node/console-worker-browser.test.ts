/**
 * The web console in Chromium against the Worker under `wrangler dev`: the console from
 * wrangler.toml's `[assets]` (the same CSP as on Node, from console/_headers), the API from the
 * Worker over Postgres through the Neon proxy. Sign-in by an e-mailed code (sent through the
 * HTTP e-mail API, a test receiver here), no token form (the route is self-hosted only), the
 * projects list, env vars through the merge PATCH with the masked secret kept (proved through
 * the API's export), a viewer's read-only forms; a cross-origin form post carrying the session
 * cookie refused (403) with the session kept; the notifications grid (one PUT per toggled cell,
 * only that cell changed per the API); the unseen badge following an event posted through the
 * Worker's events route without a reload; axe-core and screenshots (worker-*.png).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, BrowserContext, Page, Request } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  apiAs,
  codeFromEmailApi,
  expectAccessible as expectAccessibleAs,
  launchChromium,
  newContext,
  startConsoleWorker,
  type ConsoleWorker,
  watchPageErrors,
} from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

const MASK = "\u2022".repeat(8);
const SECRET = "worker-secret-never-shown";

let worker: ConsoleWorker;
let browser: Browser;
let owner: Member;
let viewer: Member;
let projectId: string;
const contexts: BrowserContext[] = [];

type Sub = { id: string; category: string; channelId: string; enabled: boolean };
const cellsOf = (subs: Sub[]) => Object.fromEntries(subs.map((s) => [`${s.category} ${s.channelId}`, s.enabled]));

/** Signs in by the e-mailed code in a fresh context and waits for `landing`'s heading. */
const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200) => apiAs<T>(worker.url, token, method, path, json, expected);
const expectAccessible = (page: Page, name: string) => expectAccessibleAs(page, `worker-${name}`);

async function signInByCode(who: Member, path: string, landing: string): Promise<{ page: Page; errors: string[] }> {
  const context = await newContext(browser, worker.url);
  contexts.push(context);
  const page = await context.newPage();
  const errors = watchPageErrors(page);
  await page.goto(path);
  await page.waitForURL(/#\/sign-in$/);
  const before = worker.email.recorder.hits.length;
  await page.getByLabel("E-mail address", { exact: true }).fill(who.email);
  await page.getByRole("button", { name: "Send code" }).click();
  const code = await codeFromEmailApi(worker.email, who.email, before);
  await page.getByLabel("Sign-in code", { exact: true }).fill(code);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.getByRole("heading", { level: 1, name: landing }).waitFor();
  return { page, errors };
}

beforeAll(async () => {
  worker = await startConsoleWorker("console_worker");
  browser = await launchChromium();
  owner = await seedTenant(worker.harness);
  viewer = await seedMember(worker.harness, owner.orgId, "viewer");
  projectId = (await api(owner.token, "POST", "/projects", { name: "shop" }, 201)).id;
  await api(owner.token, "PATCH", `/projects/${projectId}/env`, {
    upserts: [
      { key: "TO_CHANGE", value: "old" },
      { key: "TO_DELETE", value: "bye" },
      { key: "API_SECRET", value: SECRET, isSecret: true },
    ],
  });
}, 120_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await worker?.close();
});

describe("console on the Worker (wrangler dev)", () => {
  it("serves the console as static assets with the CSP of console/_headers, and the API beside it", async () => {
    const index = await fetch(`${worker.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toMatch(/^text\/html/);
    expect(index.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect((await fetch(`${worker.url}/app.js`)).headers.get("content-type")).toMatch(/^text\/javascript/);
    // _headers configures the asset server and is not served; the path reaches the Worker, which has no such route.
    expect((await fetch(`${worker.url}/_headers`)).status).toBe(404);
    expect((await fetch(`${worker.url}/api/me`)).status).toBe(401);
  });

  it("signs in by an e-mailed code; no token form on the cloud", async () => {
    const context = await newContext(browser, worker.url);
    contexts.push(context);
    const page = await context.newPage();
    // The page asks how to sign in here: by e-mail, not by token on the Worker, so the token form stays hidden.
    const methods = page.waitForResponse((r) => r.url().endsWith("/api/auth/methods"));
    await page.goto("/#/sign-in");
    expect(await (await methods).json()).toEqual({ email: true, token: false });
    await page.getByLabel("E-mail address", { exact: true }).waitFor();
    expect(await page.getByLabel("Personal access token", { exact: true }).isVisible()).toBe(false);
    await expectAccessible(page, "sign-in");
    await context.close();

    const { page: signedIn, errors } = await signInByCode(owner, "/", "Projects");
    await signedIn.getByRole("link", { name: "shop" }).waitFor();
    expect(await signedIn.getByRole("row").filter({ hasText: "shop" }).textContent()).toMatch(/created.*cloud/);
    await expectAccessible(signedIn, "projects");
    expect(errors).toEqual([]);
  });

  it("edits env vars through the merge PATCH and keeps the masked secret", async () => {
    const { page, errors } = await signInByCode(owner, `/#/projects/${projectId}`, "shop");
    const secret = page.getByLabel("Value of API_SECRET", { exact: true });
    await secret.waitFor();
    expect(await secret.inputValue()).toBe(MASK);
    await expectAccessible(page, "project");
    await page.getByLabel("Value of TO_CHANGE", { exact: true }).fill("new");
    await page.getByRole("button", { name: "Delete TO_DELETE" }).click();
    await page.getByRole("button", { name: "Add variable" }).click();
    await page.getByLabel("Name of the new variable", { exact: true }).fill("ADDED");
    await page.getByLabel("Value of the new variable", { exact: true }).fill("fresh");
    await page.getByRole("button", { name: "Save variables" }).click();
    await page.getByText("Saved: 2 set, 1 deleted.").waitFor();
    const exported = await api(owner.token, "POST", `/projects/${projectId}/export`);
    const env = Object.fromEntries(exported.environments[0].env.map((v: { key: string; value: string }) => [v.key, v.value]));
    expect(env).toEqual({ ADDED: "fresh", API_SECRET: SECRET, TO_CHANGE: "new" });
    expect(errors).toEqual([]);
  });

  it("shows a viewer read-only forms", async () => {
    const { page, errors } = await signInByCode(viewer, `/#/projects/${projectId}`, "shop");
    await page.getByLabel("Value of TO_CHANGE", { exact: true }).waitFor();
    expect(await page.locator("#read-only-note").textContent()).toMatch(/viewer, which does not include project:write/);
    expect(await page.getByLabel("Port", { exact: true }).isDisabled()).toBe(true);
    expect(await page.getByRole("button", { name: "Save variables" }).isDisabled()).toBe(true);
    await expectAccessible(page, "project-viewer");
    expect(errors).toEqual([]);
  });
});

describe("the same checks as on Node, against the Worker", () => {
  // One admin signed in once (codes are limited to 5 an hour per address); each test opens its own page.
  let admin: Member;
  let session: BrowserContext | undefined;
  let evil: Server;
  let evilUrl: string;

  beforeAll(async () => {
    admin = await seedMember(worker.harness, owner.orgId, "admin");
    // Another origin on the same host (same site, so the SameSite=Lax cookie is sent): only the Origin check stops it.
    evil = createServer((_req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(
        `<!doctype html><title>evil</title><form method="post" action="${worker.url}/api/auth/logout" enctype="text/plain"><input name="a" value="b"></form><script>document.forms[0].submit()</script>`,
      );
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((r) => (evil ? evil.close(() => r()) : r())));

  /** A page of the admin's session at `path`, its `landing` heading shown. */
  async function adminPage(path: string, landing: string): Promise<{ page: Page; errors: string[] }> {
    if (!session) {
      const first = await signInByCode(admin, path, landing);
      session = first.page.context();
      return first;
    }
    const page = await session.newPage();
    const errors = watchPageErrors(page);
    await page.goto(path);
    await page.getByRole("heading", { level: 1, name: landing }).waitFor();
    return { page, errors };
  }

  async function openNotifications(): Promise<{ page: Page; errors: string[] }> {
    const opened = await adminPage("/#/notifications", "Notifications");
    await opened.page.getByRole("heading", { level: 2, name: "Channels" }).waitFor();
    return opened;
  }

  it("refuses a state-changing form post from another origin (403), and the session lives on", async () => {
    const { page, errors } = await adminPage("/", "Projects");
    const attack = await page.context().newPage();
    const [answer] = await Promise.all([attack.waitForResponse((r) => r.url() === `${worker.url}/api/auth/logout`), attack.goto(evilUrl)]);
    expect(answer.status()).toBe(403);
    expect(answer.request().headers().origin ?? (await answer.request().headerValue("origin"))).toBe(evilUrl.slice(0, -1));
    expect(answer.headers()["content-type"]).toMatch(/^application\/problem\+json/);
    await attack.close();
    expect((await page.request.get("/api/me")).status()).toBe(200);
    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    expect(errors).toEqual([]);
  });

  it("toggles one notifications grid cell with exactly one upsert, and only that cell changes", async () => {
    const created = await api(
      admin.token,
      "POST",
      "/notifications/channels",
      { kind: "email", label: "Worker mail", config: { address: "ops@example.test" } },
      201,
    );
    await api(admin.token, "PATCH", `/notifications/channels/${created.id}`, { verified: true });
    const { page, errors } = await openNotifications();
    const cell = page.getByRole("checkbox", { name: "Backup failed on Worker mail", exact: true });
    await cell.waitFor();
    expect(await cell.isChecked()).toBe(false);
    const before = cellsOf((await api(admin.token, "GET", "/notifications/subscriptions?limit=100")).items);
    expect(before[`backup.failed ${created.id}`]).not.toBe(true);

    const writes: Request[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/api/") && r.method() !== "GET") writes.push(r);
    });
    await cell.check();
    await page.getByText("Saved: Backup failed on Worker mail is on.").waitFor();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.method()).toBe("PUT");
    expect(new URL(writes[0]!.url()).pathname).toBe("/api/notifications/subscriptions");
    expect(writes[0]!.postDataJSON()).toEqual({ category: "backup.failed", channelId: created.id, enabled: true });

    const after = cellsOf((await api(admin.token, "GET", "/notifications/subscriptions?limit=100")).items);
    expect(after).toEqual({ ...before, [`backup.failed ${created.id}`]: true });
    expect(await cell.isChecked()).toBe(true);
    await expectAccessible(page, "notifications-grid");
    expect(errors).toEqual([]);
  });

  it("counts an event posted through the Worker's events route on the unseen badge without a reload", async () => {
    const { page, errors } = await openNotifications();
    const link = page.getByRole("link", { name: /^Notifications/ });
    const badge = link.locator(".unseen-badge");
    const startCount = Number((await api(admin.token, "GET", "/notifications/deliveries/unseen-count")).count);
    await expect.poll(() => badge.getAttribute("data-count")).toBe(String(startCount));
    // A marker in the page: a reload would lose it.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    const navigations: string[] = [];
    page.on("framenavigated", (f) => navigations.push(f.url()));

    // The owner's token holds notifications:admin; deploy.failed is on by default on every member's in-app channel,
    // whose delivery is the feed row itself (nothing outbound).
    const result = await api(
      owner.token,
      "POST",
      "/notifications/events",
      { category: "deploy.failed", title: "Deploy of shop failed on the Worker", message: "Exit code 1" },
      202,
    );
    expect(result.eventId).toMatch(/^nevt_/);
    expect(result.recipients).toBeGreaterThanOrEqual(1);
    const posted = Date.now();
    await expect.poll(() => badge.getAttribute("data-count"), { timeout: 8_000, interval: 100 }).toBe(String(startCount + 1));
    const lagMs = Date.now() - posted;
    expect(await badge.isVisible()).toBe(true);
    expect(await link.textContent()).toContain(`${startCount + 1} unseen`);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    expect(navigations.filter((u) => !u.includes("#/notifications"))).toEqual([]);
    console.log(`unseen badge on the Worker updated ${lagMs} ms after the event was posted`);

    const entry = page.getByRole("listitem").filter({ hasText: "Deploy of shop failed on the Worker" });
    await entry.waitFor();
    await expectAccessible(page, "notifications-unseen");
    await entry.getByRole("button", { name: "Mark seen: Deploy of shop failed on the Worker" }).click();
    await expect.poll(() => badge.getAttribute("data-count"), { timeout: 5_000 }).toBe(String(startCount));
    expect((await api(admin.token, "GET", "/notifications/deliveries/unseen-count")).count).toBe(startCount);
    expect(errors).toEqual([]);
  });
});
