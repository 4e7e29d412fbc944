/**
 * The console's Tokens and sessions page in Chromium against the Node adapter: create a personal
 * access token with only some scopes and an expiry (the secret shown once, working against the API
 * with exactly those scopes), a refused scope set shown at the scopes, list and revoke a token after
 * a confirmation (refused from then on); the sessions signed in as you, another browser's session
 * ended from here (that browser is sent to sign-in at its next request). axe-core and screenshots
 * at 1280 and 375 px.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, signedInPage } from "../support/browser";
import { type Member, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

const signedIn = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash);

const tokenRow = (page: Page, name: string) => page.locator("table.tokens tbody tr", { hasText: name });

beforeAll(async () => {
  server = await startConsoleServer("console_tokens", { mail: false });
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("tokens and sessions page", () => {
  it("creates a scoped token with an expiry, shown once and working with those scopes; revokes it after confirming", async () => {
    const owner = await seedTenant(server.harness);
    const { page, errors } = await signedIn(owner, "#/tokens");
    await page.getByRole("heading", { level: 1, name: "Tokens and sessions" }).waitFor();
    // The seeded token the test signed in with.
    await page.getByText("1 token.").waitFor();

    // The scope boxes are off until "Only these" is chosen.
    expect(await page.getByLabel("project:read", { exact: true }).isDisabled()).toBe(true);
    await page.getByLabel("Name", { exact: true }).fill("CI deploys");
    await page.getByLabel(/Only these/).check();
    await page.getByLabel("project:read", { exact: true }).check();
    await page.getByLabel("project:write", { exact: true }).check();
    // Within the week the browser session lasts: a token never outlives the session that mints it.
    const day = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
    await page.getByLabel("Expires on (optional)").fill(day);
    await page.getByRole("button", { name: "Create token" }).click();
    await page.getByRole("heading", { name: "Token CI deploys" }).waitFor();
    const secret = await page.getByLabel("Token", { exact: true }).inputValue();
    expect(secret).toMatch(/^wsp_/);
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(secret);
    await page.getByText("2 tokens.").waitFor();
    const row = tokenRow(page, "CI deploys");
    expect(await row.textContent()).toContain("project:read");
    expect(await row.textContent()).toContain("project:write");
    expect(await row.textContent()).not.toContain("Never");
    await expectAccessible(page, "tokens");

    // The shown secret is the token, with exactly the chosen scopes and the day's end as expiry.
    const me = await apiAs(server.url, secret, "GET", "/me");
    expect([...me.tokenScopes].sort()).toEqual(["project:read", "project:write"]);
    const listed = await apiAs(server.url, owner.token, "GET", "/tokens");
    const created = listed.items.find((t: { name: string }) => t.name === "CI deploys");
    // The end of that day in the browser's time zone.
    expect(new Date(created.expiresAt).getTime()).toBe(new Date(`${day}T23:59:59`).getTime());

    await page.getByRole("button", { name: "Done" }).click();
    await page.getByLabel("Token", { exact: true }).waitFor({ state: "detached" });

    // No scope chosen under "Only these": asked for one at the scopes, nothing is created.
    await page.getByLabel("Name", { exact: true }).fill("Nothing");
    await page.getByLabel(/Only these/).check();
    await page.getByRole("button", { name: "Create token" }).click();
    await page.locator("fieldset.scopes[aria-invalid=true]").waitFor();
    await page.getByText("Choose at least one permission").waitFor();
    expect((await apiAs(server.url, owner.token, "GET", "/tokens")).items).toHaveLength(2);

    // Revoke asks first.
    await row.getByRole("button", { name: "Revoke CI deploys" }).click();
    await page.getByRole("button", { name: "Revoke CI deploys now" }).click();
    await page.getByText("CI deploys was revoked.").waitFor();
    expect(await tokenRow(page, "CI deploys").count()).toBe(0);
    await apiAs(server.url, secret, "GET", "/me", undefined, 401);
    expect(errors).toEqual([]);
  }, 120_000);

  it("lists this browser's and another browser's sessions and signs the other one out", async () => {
    const owner = await seedTenant(server.harness);
    const other = await signedIn(owner, "#/projects");
    await other.page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    const { page, errors } = await signedIn(owner, "#/tokens");
    await page.getByText("2 sessions, 1 elsewhere.").waitFor();
    const rows = page.locator("table.sessions tbody tr");
    expect(await rows.filter({ hasText: "this browser" }).count()).toBe(1);
    expect(await rows.first().textContent()).toContain("Signed in with a token");
    // The browser named in a few words, not its whole User-Agent header.
    expect(await rows.first().getByRole("rowheader").textContent()).toMatch(/^Chrome \d+ on Linux/);
    await expectAccessible(page, "tokens-sessions");

    await page.getByRole("button", { name: "Sign out everywhere else" }).click();
    await page.getByText("Signed out everywhere else.").waitFor();
    expect(await rows.count()).toBe(1);
    // The other browser is refused at its next request (a page load here; its unseen-count poll may come first) and sent to sign-in.
    await other.page.goto("/#/tokens");
    await other.page.getByRole("button", { name: "Sign in with token" }).waitFor();
    expect(errors).toEqual([]);
  }, 90_000);
});
