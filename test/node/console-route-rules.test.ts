/**
 * The console's route rules page in Chromium against the Node adapter on Postgres: a ban created
 * through the form (a bad address's 400 shown at its input first), a request through the edge then
 * refused by it (403) and shown on the HTTP requests page naming the rule; an allow-deny list's bad
 * line named at the list; rules listed in the order the edge checks them; a rule edited, disabled
 * (the edge lets the request through again) and deleted after a confirmation; a viewer reads the
 * rules without any manage control and is told why. axe-core clean, no sideways scrolling at 375 px.
 */
import { request as httpRequest } from "node:http";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, signedInPage } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let viewer: Member;
let project: { id: string; slug: string };
const contexts: BrowserContext[] = [];

const api = <T = any>(who: Member, method: string, path: string, json?: unknown, expected = 200) =>
  apiAs<T>(server.url, who.token, method, path, json, expected, who.orgId);

/** A request through the server's one port with the project's Host: the status the edge answers. */
function viaEdge(path: string): Promise<number> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: Number(port), path, headers: { host: `${project.slug}.apps.test` } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode!));
    });
    req.on("error", reject);
    req.end();
  });
}

const openAs = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash, { signInFirst: true });

/** Rule changes reach the edge through the database's notifications (milliseconds; given seconds here). */
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 100 });
const ruleRows = (page: Page) => page.locator("table.rules tbody tr");

beforeAll(async () => {
  server = await startConsoleServer("console_route_rules", { mail: false });
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  viewer = await seedMember(server.harness, owner.orgId, "viewer");
  project = await api(owner, "POST", "/projects", { name: "guarded" }, 201);
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("route rules page", () => {
  it("creates a ban (a bad address's 400 at the field first) that the edge applies, shown on the requests page", async () => {
    const { page, errors } = await openAs(owner, `#/projects/${project.id}`);
    await page.getByRole("link", { name: "Route rules", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Route rules of guarded" }).waitFor();
    await page.getByText("No rules: every request reaches the app.").waitFor();
    await expectAccessible(page, "route-rules-empty");

    // Nothing deployed: the edge's own 404, until the ban refuses first.
    expect(await viaEdge("/admin/panel")).toBe(404);

    await page.getByLabel("Kind").selectOption("ban");
    await page.getByLabel("Path (optional)").fill("/admin");
    await page.getByLabel("Address or block").fill("300.1.2.3");
    await page.getByRole("button", { name: "Add rule" }).click();
    const cidr = page.locator("input[name=cidr][aria-invalid=true]");
    await cidr.waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("cidr");
    expect(await page.locator("form.rule-form .field-error").count()).toBe(1);
    await expectAccessible(page, "route-rules-field-error");

    await page.getByLabel("Address or block").fill("127.0.0.1");
    await page.getByLabel("Reason (optional)").fill("probing the admin panel");
    await page.getByRole("button", { name: "Add rule" }).click();
    await page.getByText(/^1 rule\. Added ban rule rr_/).waitFor();
    expect(await page.locator("input[aria-invalid=true]").count()).toBe(0);
    const row = ruleRows(page).first();
    expect(await row.textContent()).toMatch(/^1Ban rr_\w+\/admin127\.0\.0\.1, no end: probing the admin panelenabled/);
    const [rule] = (await api<{ items: Array<{ id: string; kind: string; cidr: string; path: string }> }>(owner, "GET", `/projects/${project.id}/route-rules`))
      .items;
    expect(rule).toMatchObject({ kind: "ban", cidr: "127.0.0.1", path: "/admin", reason: "probing the admin panel", enabled: true });
    await expectAccessible(page, "route-rules-one");

    // The edge refuses the request now, and the requests page names the rule that did.
    await poll(() => viaEdge("/admin/panel")).toBe(403);
    expect(await viaEdge("/public")).toBe(404);
    // The edge's log writer batches: wait for the line before reading the page.
    await poll(async () => (await api(owner, "GET", `/projects/${project.id}/server-logs/recent?status=403`)).items.length).toBeGreaterThan(0);
    await page.goto(`/#/projects/${project.id}/requests`);
    await page.getByRole("heading", { level: 1, name: "HTTP requests of guarded" }).waitFor();
    const refused = page.locator("table.requests tbody tr", { hasText: "/admin/panel" }).filter({ hasText: "403" });
    await refused.first().waitFor();
    expect(await refused.first().locator("td").last().textContent()).toBe(`ban ${rule!.id}`);
    expect(await refused.first().getByRole("link").getAttribute("href")).toBe(`#/projects/${project.id}/rules`);
    expect(errors).toEqual([]);
  });

  it("names the bad line of an allow-deny list, and lists rules in the order the edge checks them", async () => {
    const { page, errors } = await openAs(owner, `#/projects/${project.id}/rules`);
    await page.getByRole("heading", { level: 1, name: "Route rules of guarded" }).waitFor();
    // A rate limit first, so creation order and evaluation order differ.
    await page.getByLabel("Kind").selectOption("rate-limit");
    await page.getByLabel("Requests allowed").fill("0");
    await page.getByLabel("Window (seconds)").fill("60");
    await page.getByRole("button", { name: "Add rule" }).click();
    await page.locator("input[name=limit][aria-invalid=true]").waitFor();
    await page.getByLabel("Requests allowed").fill("100");
    await page.getByRole("button", { name: "Add rule" }).click();
    await page.getByText(/Added rate limit rule rr_/).waitFor();

    await page.getByLabel("Kind").selectOption("allow-deny");
    // Only the chosen kind's fields are shown.
    expect(await page.getByLabel("Requests allowed").isVisible()).toBe(false);
    expect(await page.getByLabel("Address or block").isVisible()).toBe(false);
    await page.getByLabel("Mode").selectOption("deny");
    await page.getByLabel("Addresses or blocks").fill("10.0.0.0/8\nnot-an-address\n");
    await page.getByRole("button", { name: "Add rule" }).click();
    await page.locator("textarea[name=cidrs][aria-invalid=true]").waitFor();
    expect(await page.locator("form.rule-form .field-error").textContent()).toMatch(/^Address 2/);
    await page.getByLabel("Addresses or blocks").fill("10.0.0.0/8\n192.0.2.0/24");
    await page.getByRole("button", { name: "Add rule" }).click();
    await page.getByText(/Added allow or deny rule rr_/).waitFor();

    // Bans, then allow-deny, then rate limits.
    await poll(async () => (await ruleRows(page).locator("th").allTextContents()).map((t) => t.split(" ")[0])).toEqual(["Ban", "Allow", "Rate"]);
    expect(await ruleRows(page).nth(1).textContent()).toContain("Refused: 10.0.0.0/8, 192.0.2.0/24");
    expect(await ruleRows(page).nth(2).textContent()).toContain("100 requests per 60 s per client address");
    await expectAccessible(page, "route-rules-three");
    expect(errors).toEqual([]);
  });

  it("edits, disables and deletes a rule after a confirmation", async () => {
    const { items } = await api<{ items: Array<{ id: string; kind: string }> }>(owner, "GET", `/projects/${project.id}/route-rules`);
    const ban = items.find((r) => r.kind === "ban")!;
    const { page, errors } = await openAs(owner, `#/projects/${project.id}/rules`);
    await page.getByRole("heading", { level: 1, name: "Route rules of guarded" }).waitFor();

    await page.getByRole("button", { name: `Edit rule ${ban.id}`, exact: true }).click();
    const form = page.locator(`form[data-rule="${ban.id}"]`);
    await form.getByRole("heading", { name: `Edit ban rule ${ban.id}` }).waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe("H3");
    await form.getByLabel("Path (optional)").fill("/secret");
    await form.getByLabel("Address or block").fill("bad/99");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.locator("input[name=cidr][aria-invalid=true]").waitFor();
    await form.getByLabel("Address or block").fill("127.0.0.0/8");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText(`Rule ${ban.id} was saved.`).waitFor();
    const row = page.locator(`tr[data-rule="${ban.id}"]`);
    expect(await row.textContent()).toContain("/secret");
    expect(await row.textContent()).toContain("127.0.0.0/8");
    expect(await form.count()).toBe(0);
    await poll(() => viaEdge("/secret")).toBe(403);
    expect(await viaEdge("/admin")).toBe(404);

    // Disabled: kept, shown disabled, and the edge lets the request through (to its own 404).
    await page.getByRole("button", { name: `Disable rule ${ban.id}`, exact: true }).click();
    await page.getByText(`Rule ${ban.id} is disabled: the edge no longer checks it.`).waitFor();
    expect(await row.locator(".badge").textContent()).toBe("disabled");
    await poll(() => viaEdge("/secret")).toBe(404);
    await page.getByRole("button", { name: `Enable rule ${ban.id}`, exact: true }).click();
    await page.getByText(`Rule ${ban.id} is enabled.`).waitFor();
    await poll(() => viaEdge("/secret")).toBe(403);

    // Delete asks first; Keep keeps it.
    await page.getByRole("button", { name: `Delete rule ${ban.id}`, exact: true }).click();
    await page.getByText("Delete this ban rule? The edge stops applying it within a second.").waitFor();
    await expectAccessible(page, "route-rules-confirm-delete");
    await page.getByRole("button", { name: "Keep" }).click();
    expect(await row.count()).toBe(1);
    await page.getByRole("button", { name: `Delete rule ${ban.id}`, exact: true }).click();
    await page.getByRole("button", { name: `Delete rule ${ban.id} now`, exact: true }).click();
    await page.getByText(`Rule ${ban.id} was deleted.`).waitFor();
    expect(await row.count()).toBe(0);
    expect((await api<{ items: unknown[] }>(owner, "GET", `/projects/${project.id}/route-rules`)).items).toHaveLength(2);
    await poll(() => viaEdge("/secret")).toBe(404);
    expect(errors).toEqual([]);
  });

  it("lets a viewer read the rules, with no manage control and the reason", async () => {
    const { page, errors } = await openAs(viewer, `#/projects/${project.id}/rules`);
    await page.getByRole("heading", { level: 1, name: "Route rules of guarded" }).waitFor();
    await page.getByText("2 rules.").waitFor();
    await page
      .getByText(/You can read these rules but not change them: your role in this organization is viewer, which does not include project:write/)
      .waitFor();
    expect(await page.locator("main button").count()).toBe(0);
    expect(await page.locator("main form").count()).toBe(0);
    expect(await page.locator("table.rules thead th").allTextContents()).toEqual(["Order", "Rule", "Path", "Parameters", "State"]);
    await expectAccessible(page, "route-rules-viewer");
    expect(errors).toEqual([]);
  });
});
