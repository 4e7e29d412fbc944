/**
 * The console's sign-in page in Chromium against `npm start`'s server: the first owner's
 * default address (WORKSPACE_OWNER_EMAIL unset) signs in by an e-mailed code; every request
 * the browser sends is watched: none answers an error but the signed-out GET /api/me (how
 * the console learns it must show the sign-in page), no probe of POST /api/auth/token, and
 * the favicon is served. Without e-mail the code form is hidden and a plain sentence says
 * why. axe-core on each state.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_OWNER_EMAIL } from "../../functions/identity/store";
import { codeFor, type ConsoleServer, expectAccessible, launchChromium, newContext, startConsoleServer, watchPageErrors } from "../support/browser";
import { seedTenant } from "../support/harness";

let server: ConsoleServer;
let bare: ConsoleServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  [server, bare] = await Promise.all([startConsoleServer("console_signin"), startConsoleServer("console_signin_nomail", { mail: false })]);
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
  await bare?.close();
});

interface Seen {
  method: string;
  path: string;
  status: number;
}

/** A fresh page, and every answer it gets (method, path, status), including the browser's own (favicon). */
async function watchedPage(url: string): Promise<{ page: Page; seen: Seen[]; errors: string[] }> {
  const context = await newContext(browser, url);
  contexts.push(context);
  const page = await context.newPage();
  const seen: Seen[] = [];
  page.on("response", (r) => seen.push({ method: r.request().method(), path: new URL(r.url()).pathname, status: r.status() }));
  // A request the page itself dropped (a poll in flight when the page reloads) is not a failure.
  page.on("requestfailed", (r) => {
    if (r.failure()?.errorText !== "net::ERR_ABORTED") seen.push({ method: r.method(), path: new URL(r.url()).pathname, status: 0 });
  });
  return { page, seen, errors: watchPageErrors(page) };
}

const failing = (seen: Seen[]) => seen.filter((s) => s.status === 0 || s.status >= 400);
/** The one error a signed-out page load may see: asking who is signed in. */
const SIGNED_OUT = { method: "GET", path: "/api/me", status: 401 };

describe("console sign-in", () => {
  it("serves a favicon (no 404 for /favicon.ico) and the icon the page links", async () => {
    const ico = await fetch(`${server.url}/favicon.ico`);
    expect(ico.status).toBe(200);
    expect(ico.headers.get("content-type")).toBe("image/x-icon");
    expect(Buffer.from(await ico.arrayBuffer()).subarray(0, 4)).toEqual(Buffer.from([0, 0, 1, 0]));
    const svg = await fetch(`${server.url}/favicon.svg`);
    expect(svg.status).toBe(200);
    expect(svg.headers.get("content-type")).toBe("image/svg+xml");
    expect(await (await fetch(`${server.url}/`)).text()).toContain('<link rel="icon" href="/favicon.svg"');
  });

  it("signs the first owner in by an e-mailed code at the default address, sending no request known to fail", async () => {
    expect(DEFAULT_OWNER_EMAIL).toBe("owner@workspace.localhost");
    const { page, seen, errors } = await watchedPage(server.url);
    await page.goto("/");
    await page.waitForURL(/#\/sign-in$/);
    const email = page.getByLabel("E-mail address", { exact: true });
    await email.waitFor();
    await page.getByLabel("Personal access token", { exact: true }).waitFor();
    expect(await page.getByRole("note").count()).toBe(0);
    await expectAccessible(page, "sign-in-methods");

    const before = server.smtp.messages.length;
    await email.fill(DEFAULT_OWNER_EMAIL);
    await page.getByRole("button", { name: "Send code" }).click();
    const code = page.getByLabel("Sign-in code", { exact: true });
    await code.waitFor();
    await code.fill(await codeFor(server.smtp, DEFAULT_OWNER_EMAIL, before));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    expect(await page.locator(".who .email").textContent()).toBe(DEFAULT_OWNER_EMAIL);

    expect(failing(seen)).toEqual([SIGNED_OUT]);
    expect(seen.filter((s) => s.path === "/api/auth/token")).toEqual([]);
    expect(seen).toContainEqual({ method: "GET", path: "/api/auth/methods", status: 200 });

    // Signed in, a page load answers no error at all.
    const reloaded = seen.length;
    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    await page.waitForLoadState("networkidle");
    expect(failing(seen.slice(reloaded))).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("hides the code form on a server without e-mail and says so plainly; the token signs in", async () => {
    const owner = await seedTenant(bare.harness);
    const { page, seen, errors } = await watchedPage(bare.url);
    await page.goto("/#/sign-in");
    const token = page.getByLabel("Personal access token", { exact: true });
    await token.waitFor();
    const note = page.getByRole("note");
    await note.waitFor();
    expect(await note.textContent()).toBe("This server cannot send e-mail, so sign in with a personal access token.");
    expect(await page.getByLabel("E-mail address", { exact: true }).isVisible()).toBe(false);
    expect(await page.getByRole("button", { name: "Send code" }).isVisible()).toBe(false);
    // No API words on the page: no routes, no variable names.
    expect(await page.locator("main").textContent()).not.toMatch(/\/api\/|POST |SMTP_URL|EMAIL_API_KEY/);
    await expectAccessible(page, "sign-in-no-mail");

    await token.fill(owner.token);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    expect(failing(seen)).toEqual([]);
    expect(seen.filter((s) => s.path === "/api/auth/login")).toEqual([]);
    expect(errors).toEqual([]);
  });
});
