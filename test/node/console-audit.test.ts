/**
 * The console's Audit log page in Chromium against the Node adapter: an owner sees the
 * organization's changes newest first (who, action, target, details), filters by action and
 * pages with "Show older"; a secret variable's canary value is nowhere on the page; a member
 * has no link and is told the page is for owners and admins; axe-core and screenshots at
 * 1280 and 375 px.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiAs, expectAccessible, launchChromium, newContext, startConsoleServer, type ConsoleServer, watchPageErrors } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

const CANARY = "canary-secret-value-5e7c1a90";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let member: Member;
const contexts: BrowserContext[] = [];

const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200) => apiAs<T>(server.url, token, method, path, json, expected);

async function signedIn(who: Member, hash: string): Promise<{ page: Page; errors: string[] }> {
  const context = await newContext(browser, server.url);
  contexts.push(context);
  const page = await context.newPage();
  const errors = watchPageErrors(page);
  await page.goto(`/${hash}`);
  await page.getByLabel("Personal access token", { exact: true }).fill(who.token);
  await page.getByRole("button", { name: "Sign in with token" }).click();
  return { page, errors };
}

beforeAll(async () => {
  server = await startConsoleServer("console_audit");
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  member = await seedMember(server.harness, owner.orgId, "member");
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("audit log page", () => {
  it("lists the organization's changes newest first, filters by action, pages older entries; no secret value on the page", async () => {
    const project = await api<{ id: string }>(owner.token, "POST", "/projects", { name: "Audited app" }, 201);
    await api(owner.token, "PATCH", `/projects/${project.id}/env`, { upserts: [{ key: "API_KEY", value: CANARY, isSecret: true }] });
    // 55 more rows: more than one page of 50.
    for (let i = 0; i < 55; i++) await api(owner.token, "PATCH", `/projects/${project.id}/env`, { upserts: [{ key: `STEP_${i}`, value: String(i) }] });

    const { page, errors } = await signedIn(owner, "#/audit");
    await page.getByRole("heading", { level: 1, name: "Audit log" }).waitFor();
    await page.getByText("50 entries shown.").waitFor();
    const firstRow = page.locator("table.audit tbody tr").first();
    expect(await firstRow.textContent()).toContain("STEP_54");
    await expectAccessible(page, "audit");

    await page.getByRole("button", { name: "Show older" }).click();
    await page.getByText("57 entries shown.").waitFor();
    expect(await page.getByRole("button", { name: "Show older" }).isVisible()).toBe(false);
    const last = await page.locator("table.audit tbody tr").last().textContent();
    expect(last).toContain("project.created");
    expect(last).toContain(project.id);

    // The secret's row names the variable, never its value.
    expect(await page.locator("table.audit tbody tr", { hasText: "API_KEY" }).count()).toBe(1);
    await page.getByLabel("Action", { exact: true }).selectOption("project.created");
    await page.getByText("1 entry shown.").waitFor();
    expect(await page.locator("table.audit tbody tr").first().textContent()).toContain(project.id);
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(CANARY);
    expect(errors).toEqual([]);
  }, 120_000);

  it("a member has no link to it and is told it is for owners and admins", async () => {
    const { page, errors } = await signedIn(member, "#/projects");
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    expect(await page.getByRole("link", { name: "Audit log" }).count()).toBe(0);
    await page.goto("/#/audit");
    await page.getByText(/The audit log is for owners and admins/).waitFor();
    expect(errors).toEqual([]);
  }, 60_000);
});
