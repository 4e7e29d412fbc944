/**
 * The console's HTTP requests page in Chromium against the Node adapter on Postgres: request
 * lines seeded through the log store (as the edge's writer appends them) fill the table and the
 * filters narrow it through the API (a malformed status's 400 shown at its input); "Follow live"
 * shows a real request made through the edge after the page opened (nothing deployed: the edge's
 * own 404, logged like any other); a stream the server closes is resumed after the newest row
 * (Last-Event-ID) without repeating one, and closed when the page is left; the stream's closing event (the project deleted) is shown with
 * its reason. Where the routes are unknown (the cloud) the page says so in a sentence. axe-core
 * clean, no sideways scrolling at 375 px.
 */
import { request as httpRequest } from "node:http";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestSeeder, type SeededRequest } from "../suites/logs/support";
import { sseSettings } from "../../shared/http/sse";
import { apiAs, expectAccessible, launchChromium, newContext, startConsoleServer, type ConsoleServer, watchPageErrors, signedInPage } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let viewer: Member;
const contexts: BrowserContext[] = [];

const api = <T = any>(who: Member, method: string, path: string, json?: unknown, expected = 200) =>
  apiAs<T>(server.url, who.token, method, path, json, expected, who.orgId);

/** A request through the server's one port with an app's Host: what the edge answers. */
function viaEdge(host: string, path: string): Promise<number> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: Number(port), path, headers: { host } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode!));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Request lines as the edge writes them, on the shop's host, 2 KiB each. */
const seedRequests = (projectId: string, requests: SeededRequest[]) =>
  requestSeeder(server.harness)(
    { orgId: owner.orgId, projectId },
    requests.map((r) => ({ host: "shop.apps.test", bytes: 2048, ...r })),
  );

const openAs = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash, { signInFirst: true });

const rows = (page: Page) => page.locator("table.requests tbody tr");
const paths = (page: Page) => page.locator("table.requests tbody tr td:nth-child(4)").allTextContents();
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 100 });

beforeAll(async () => {
  server = await startConsoleServer("console_request_logs", { mail: false });
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  viewer = await seedMember(server.harness, owner.orgId, "viewer");
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("HTTP requests page", () => {
  it("is linked from the project page and says when there are no requests yet", async () => {
    const project = await api(owner, "POST", "/projects", { name: "empty" }, 201);
    const { page, errors } = await openAs(owner, `#/projects/${project.id}`);
    await page.getByRole("link", { name: "HTTP requests", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "HTTP requests of empty" }).waitFor();
    await page.getByText("No requests yet: each request to the project's hostnames shows here once the edge has served it.").waitFor();
    expect(await page.locator("table.requests").isVisible()).toBe(false);
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe("H1");
    expect(errors).toEqual([]);
  });

  it("shows the seeded requests newest first, and the filters narrow them through the API", async () => {
    const project = await api(owner, "POST", "/projects", { name: "shop" }, 201);
    const old = new Date(Date.now() - 3 * 24 * 3600_000);
    await seedRequests(project.id, [{ method: "GET", path: "/old", status: 200, at: old }]);
    await seedRequests(project.id, [
      { method: "GET", path: "/", status: 200 },
      { method: "POST", path: "/api/orders", status: 201 },
      { method: "GET", path: "/api/missing", status: 404 },
      { method: "GET", path: "/boom", status: 500 },
    ]);

    const { page, errors } = await openAs(viewer, `#/projects/${project.id}/requests`);
    await page.getByRole("heading", { level: 1, name: "HTTP requests of shop" }).waitFor();
    await page.getByText("Showing 5 requests.").waitFor();
    expect(await paths(page)).toEqual(["/boom", "/api/missing", "/api/orders", "/", "/old"]);
    const first = rows(page).first();
    expect(await first.locator("th[scope=row] time").getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await first.textContent()).toMatch(/GET.*shop\.apps\.test.*\/boom.*500.*3 ms.*2\.0 KiB.*203\.0\.113\.9/);
    expect(await page.locator("table.requests caption").textContent()).toBe("HTTP requests, newest first");
    expect(await page.locator("table.requests thead th[scope=col]").count()).toBe(9);
    await expectAccessible(page, "request-logs");

    // A status class.
    await page.getByLabel("Status", { exact: true }).fill("4xx");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await poll(() => paths(page)).toEqual(["/api/missing"]);
    await page.getByText("Showing 1 request matching status 4xx.").waitFor();

    // A method and a path prefix together.
    await page.getByLabel("Status", { exact: true }).fill("");
    await page.getByLabel("Method").selectOption("GET");
    await page.getByLabel("Path starts with").fill("/api");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await poll(() => paths(page)).toEqual(["/api/missing"]);

    // Since a day ago: the old request goes.
    await page.getByRole("button", { name: "Clear filters" }).click();
    await poll(() => rows(page).count()).toBe(5);
    const dayAgo = new Date(Date.now() - 24 * 3600_000);
    const local = new Date(dayAgo.getTime() - dayAgo.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await page.getByLabel("Since").fill(local);
    await page.getByRole("button", { name: "Apply filters" }).click();
    await poll(() => rows(page).count()).toBe(4);
    expect(await paths(page)).not.toContain("/old");

    // Nothing matches: said so with the filters in words.
    await page.getByLabel("Path starts with").fill("/nothing-here");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await page.getByText(/^No requests match these filters \(paths starting with \/nothing-here, since /).waitFor();

    // The API's 400 for a malformed status, at its input.
    await page.getByRole("button", { name: "Clear filters" }).click();
    await page.getByLabel("Status", { exact: true }).fill("4x");
    await page.getByRole("button", { name: "Apply filters" }).click();
    const status = page.locator("input[name=status][aria-invalid=true]");
    await status.waitFor();
    expect(await page.locator(".field-error").textContent()).toMatch(/status class such as 5xx/);
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("status");
    await expectAccessible(page, "request-logs-filter-error");
    expect(errors).toEqual([]);
  });

  it("reads older requests a page at a time", async () => {
    const project = await api(owner, "POST", "/projects", { name: "busy" }, 201);
    await seedRequests(
      project.id,
      Array.from({ length: 130 }, (_, i) => ({ method: "GET", path: `/n${i}`, status: 200 })),
    );
    const { page, errors } = await openAs(owner, `#/projects/${project.id}/requests`);
    await page.getByText("Showing 100 requests.").waitFor();
    expect((await paths(page))[0]).toBe("/n129");
    await page.getByRole("button", { name: "Show older requests" }).click();
    await page.getByText("Showing 130 requests.").waitFor();
    expect((await paths(page)).at(-1)).toBe("/n0");
    expect(await page.getByRole("button", { name: "Show older requests" }).isVisible()).toBe(false);
    expect(errors).toEqual([]);
  });

  it("follows live: a request made through the edge after the page opened appears at the top", async () => {
    const project = await api(owner, "POST", "/projects", { name: "live" }, 201);
    await seedRequests(project.id, [{ method: "GET", path: "/before", status: 200 }]);
    const { page, errors } = await openAs(owner, `#/projects/${project.id}/requests`);
    await page.getByText("Showing 1 request.").waitFor();
    const live = page.getByRole("button", { name: "Follow live" });
    await live.click();
    expect(await live.getAttribute("aria-pressed")).toBe("true");
    await poll(() => page.locator("#live-status").textContent()).toBe("Following live: new requests appear at the top.");

    // Nothing is deployed: the edge answers its own 404 and logs it as it logs every request.
    expect(await viaEdge(`${project.slug}.apps.test`, "/after?token=never-stored")).toBe(404);
    await poll(() => paths(page)).toEqual(["/after", "/before"]);
    const row = rows(page).first();
    expect(await row.textContent()).toMatch(/GET.*\/after.*404/);
    expect(await row.textContent()).not.toContain("never-stored");
    expect(await row.textContent()).toContain(`${project.slug}.apps.test`);
    await expectAccessible(page, "request-logs-live");

    // Off again: a later request is not shown until the page reads again.
    await live.click();
    expect(await live.getAttribute("aria-pressed")).toBe("false");
    expect(await viaEdge(`${project.slug}.apps.test`, "/later")).toBe(404);
    await page.waitForTimeout(1500);
    expect(await paths(page)).toEqual(["/after", "/before"]);

    // On again: the stream starts after the newest row shown, so the request made meanwhile arrives, once.
    await live.click();
    await poll(() => paths(page)).toEqual(["/later", "/after", "/before"]);
    expect(errors).toEqual([]);
  });

  it("goes on after the newest row when the server closes the stream, and closes it when the page is left", async () => {
    // The server in this process closes every stream after 2 s (its hour, shortened), as a proxy or a restart would.
    const maxStreamMs = sseSettings.maxStreamMs;
    sseSettings.maxStreamMs = 2_000;
    try {
      const project = await api(owner, "POST", "/projects", { name: "resumed" }, 201);
      const { page, errors } = await openAs(owner, `#/projects/${project.id}/requests`);
      const opened: Array<string | undefined> = [];
      const ended: string[] = [];
      const isStream = (url: string) => url.includes("/server-logs/stream");
      page.on("request", (r) => isStream(r.url()) && opened.push(r.headers()["last-event-id"]));
      page.on("requestfailed", (r) => isStream(r.url()) && ended.push(r.url()));
      page.on("requestfinished", (r) => isStream(r.url()) && ended.push(r.url()));
      await page.getByText(/^No requests yet/).waitFor();
      await page.getByRole("button", { name: "Follow live" }).click();
      await seedRequests(project.id, [{ method: "GET", path: "/first", status: 200 }]);
      await poll(() => paths(page)).toEqual(["/first"]);
      // Closed by the server, reconnected with Last-Event-ID: the next request arrives, the earlier one is not repeated.
      await poll(() => opened.length).toBeGreaterThanOrEqual(2);
      expect(opened[0]).toBe("0");
      expect(Number(opened.at(-1))).toBeGreaterThan(0);
      await seedRequests(project.id, [{ method: "GET", path: "/second", status: 200 }]);
      await poll(() => paths(page)).toEqual(["/second", "/first"]);
      await page.waitForTimeout(2_500);
      expect(await paths(page)).toEqual(["/second", "/first"]);

      // Leaving the page ends its stream (no connection left open behind it).
      await page.getByRole("link", { name: "← resumed" }).click();
      await page.getByRole("heading", { level: 1, name: "resumed" }).waitFor();
      await poll(() => ended.length).toBe(opened.length);
      expect(errors).toEqual([]);
    } finally {
      sseSettings.maxStreamMs = maxStreamMs;
    }
  });

  it("shows the stream's closing reason when the project is deleted while following", async () => {
    const project = await api(owner, "POST", "/projects", { name: "doomed" }, 201);
    const { page, errors } = await openAs(owner, `#/projects/${project.id}/requests`);
    await page.getByText(/^No requests yet/).waitFor();
    await page.getByRole("button", { name: "Follow live" }).click();
    await poll(() => page.locator("#live-status").textContent()).toBe("Following live: new requests appear at the top.");
    await api(owner, "DELETE", `/projects/${project.id}`);
    await poll(() => page.locator("#live-status").textContent()).toMatch(/^The live stream ended: project deleted/);
    expect(await page.getByRole("button", { name: "Follow live" }).getAttribute("aria-pressed")).toBe("false");
    expect(errors).toEqual([]);
  });

  it("says in a sentence that a server without the routes (the cloud) keeps no request logs", async () => {
    const project = await api(owner, "POST", "/projects", { name: "cloudlike" }, 201);
    const context = await newContext(browser, server.url);
    contexts.push(context);
    // The Worker's answer for a route it does not have (functions/app.ts notFound), as it would arrive.
    await context.route(/\/api\/projects\/[^/]+\/(server-logs|route-rules)/, (route) =>
      route.fulfill({
        status: 404,
        contentType: "application/problem+json",
        body: JSON.stringify({ type: "about:blank", title: "Not Found", status: 404, detail: `No route for GET ${new URL(route.request().url()).pathname}` }),
      }),
    );
    const page = await context.newPage();
    const errors = watchPageErrors(page);
    await page.goto("/#/sign-in");
    await page.getByLabel("Personal access token", { exact: true }).fill(owner.token);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    await page.goto(`/#/projects/${project.id}/requests`);
    await page.getByText("This server does not keep request logs: they are written by the edge of a self-hosted server.").waitFor();
    expect(await page.getByRole("button", { name: "Follow live" }).isDisabled()).toBe(true);
    expect(await page.getByRole("alert").count()).toBe(0);
    await page.goto(`/#/projects/${project.id}/rules`);
    await page.getByText("This server has no route rules: they are applied by the edge of a self-hosted server, where this page manages them.").waitFor();
    expect(await page.getByRole("button", { name: "Add rule" }).count()).toBe(0);
    await expectAccessible(page, "route-rules-unknown-route");
    expect(errors).toEqual([]);
  });
});
