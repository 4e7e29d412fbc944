/**
 * The web console in Chromium against the Worker under `wrangler dev`: the console from
 * wrangler.toml's `[assets]` (the same CSP as on Node, from console/_headers), the API from the
 * Worker over Postgres through the Neon proxy. Sign-in by an e-mailed code (sent through the
 * HTTP e-mail API, a test receiver here), no token form (the route is self-hosted only), the
 * projects list, env vars through the merge PATCH with the masked secret kept (proved through
 * the API's export), a viewer's read-only forms; axe-core and screenshots (worker-*.png).
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ConsoleWorker,
  codeFromEmailApi,
  launchChromium,
  newContext,
  overflowsAtPhoneWidth,
  screenshots,
  seriousViolations,
  startConsoleWorker,
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

async function api<T = any>(token: string, method: string, path: string, json?: unknown, expected = 200): Promise<T> {
  const res = await fetch(`${worker.url}/api${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(json === undefined ? {} : { "content-type": "application/json" }) },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

async function expectAccessible(page: Page, name: string) {
  await screenshots(page, `worker-${name}`);
  expect(await seriousViolations(page), `axe on ${name}`).toEqual([]);
  expect(await overflowsAtPhoneWidth(page), `${name} scrolls sideways at 375 px`).toBe(false);
}

/** Signs in by the e-mailed code in a fresh context and waits for `landing`'s heading. */
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
    // The page probes POST /api/auth/token once: 404 on the Worker, so the token form stays hidden.
    const probe = page.waitForResponse((r) => r.url().endsWith("/api/auth/token"));
    await page.goto("/#/sign-in");
    expect((await probe).status()).toBe(404);
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
