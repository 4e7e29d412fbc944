/**
 * The console's Members page in Chromium against the Node adapter: an owner sees the members with
 * their roles, changes a role, removes a member after a confirmation (a refused last-owner change
 * shown on its row is the API's), invites an address and gets the code once with a Copy button (the
 * code accepted afterwards through the API; "Done" removes it from the page), sees the open
 * invitations (never a code) and revokes one after a confirmation (its code refused); an admin is not
 * offered the owner role; a viewer sees the list read-only. The shell links the API reference.
 * axe-core and screenshots at 1280 and 375 px.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, signedInPage } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200) => apiAs<T>(server.url, token, method, path, json, expected);

const signedIn = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash, { clipboard: true });

const rowOf = (page: Page, email: string) => page.locator("table.members tbody tr", { hasText: email });

beforeAll(async () => {
  server = await startConsoleServer("console_members", { mail: false });
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("members page", () => {
  it("an owner changes a role, removes a member after confirming, and invites with the code shown once", async () => {
    const owner = await seedTenant(server.harness);
    const member = await seedMember(server.harness, owner.orgId, "member");
    const leaving = await seedMember(server.harness, owner.orgId, "viewer");
    const { page, errors } = await signedIn(owner, "#/members");
    await page.getByRole("heading", { level: 1, name: "Members" }).waitFor();
    await page.getByText("3 members.").waitFor();
    expect(await rowOf(page, owner.email).textContent()).toContain("Another owner or admin changes your role.");
    expect(await rowOf(page, member.email).getByRole("cell").nth(0).textContent()).toBe("member");

    // The API reference is one click away, on the server's own page.
    expect(await page.getByRole("link", { name: "API reference" }).getAttribute("href")).toBe("/api/docs");
    expect(await page.getByRole("link", { name: "Members" }).getAttribute("aria-current")).toBe("page");

    // A role change without a change says so instead of sending it; a real one is saved.
    await page.getByRole("button", { name: `Change role of ${member.email}` }).click();
    await rowOf(page, member.email).getByRole("alert").getByText("is already member").waitFor();
    await page.getByLabel(`Role of ${member.email}`).selectOption("admin");
    await page.getByRole("button", { name: `Change role of ${member.email}` }).click();
    await page.getByText(`${member.email} is now admin.`).waitFor();
    expect((await api(member.token, "GET", "/me")).organizations[0].role).toBe("admin");

    // Removing asks first; "Keep" keeps.
    await page.getByRole("button", { name: `Remove ${leaving.email}`, exact: true }).click();
    await page.getByText(`Remove ${leaving.email}? They lose access at once`).waitFor();
    await page.getByRole("button", { name: "Keep" }).click();
    await page.getByRole("button", { name: `Remove ${leaving.email} now` }).waitFor({ state: "detached" });
    await page.getByRole("button", { name: `Remove ${leaving.email}`, exact: true }).click();
    await page.getByRole("button", { name: `Remove ${leaving.email} now` }).click();
    await page.getByText(`${leaving.email} was removed.`).waitFor();
    await page.getByText("2 members.").waitFor();
    await api(leaving.token, "GET", `/orgs/${owner.orgId}/members`, undefined, 403);

    // A bad address is shown at the field.
    await page.getByLabel("E-mail address").fill("not-an-address");
    await page.getByRole("button", { name: "Create invitation" }).click();
    await page.locator("input[name=email][aria-invalid=true]").waitFor();

    const invitee = `invitee-${Date.now()}@example.test`;
    await page.getByLabel("E-mail address").fill(invitee);
    await page.getByLabel("Role", { exact: true }).selectOption("viewer");
    await page.getByRole("button", { name: "Create invitation" }).click();
    await page.getByRole("heading", { name: `Invitation for ${invitee} (viewer)` }).waitFor();
    const code = await page.getByLabel("Invitation code").inputValue();
    expect(code).toMatch(/^wsi_/);
    // The code is a property of the field, never in the markup.
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(code);
    await page.getByRole("button", { name: "Copy Invitation code" }).click();
    await page.getByText("Invitation code copied.").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(code);
    expect(await page.getByLabel("Command to accept").inputValue()).toContain(code);
    await expectAccessible(page, "members-owner");

    await page.getByRole("button", { name: "Done" }).click();
    await page.getByLabel("Invitation code").waitFor({ state: "detached" });
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("email");

    // The open invitation is listed with who sent it, without its code.
    const invitation = page.locator("table.invitations tbody tr", { hasText: invitee });
    expect(await invitation.textContent()).toContain(owner.email);
    expect(await invitation.textContent()).toContain("viewer");
    await page.getByText("1 open invitation.").waitFor();

    // Revoking asks first, then the code stops working.
    const revoked = `revoked-${Date.now()}@example.test`;
    await page.getByLabel("E-mail address").fill(revoked);
    await page.getByRole("button", { name: "Create invitation" }).click();
    const revokedCode = await page.getByLabel("Invitation code").inputValue();
    await page.getByText("2 open invitations.").waitFor();
    await page.getByRole("button", { name: "Done" }).click();
    await page.getByRole("button", { name: `Revoke the invitation for ${revoked}`, exact: true }).click();
    await page.getByText(`Its code stops working at once; ${revoked} can be invited again.`).waitFor();
    await expectAccessible(page, "members-revoke");
    await page.getByRole("button", { name: `Revoke the invitation for ${revoked} now` }).click();
    await page.getByText(`The invitation for ${revoked} was revoked.`).waitFor();
    expect(await page.locator("table.invitations tbody tr", { hasText: revoked }).count()).toBe(0);
    const refused = await fetch(`${server.url}/api/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ code: revokedCode, name: "Too Late" }),
    });
    expect(refused.status).toBe(404);

    // The copied code is the real one; once accepted it leaves the list.
    const accepted = await fetch(`${server.url}/api/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ code, name: "Invited Person" }),
    });
    expect(accepted.status).toBe(200);
    await page.reload();
    await page.getByText("No open invitations.").waitFor();
    expect(await page.locator("table.invitations").isVisible()).toBe(false);
    expect(errors).toEqual([]);
  }, 120_000);

  it("an admin is not offered the owner role; a viewer reads the list without controls", async () => {
    const owner = await seedTenant(server.harness);
    const admin = await seedMember(server.harness, owner.orgId, "admin");
    const viewer = await seedMember(server.harness, owner.orgId, "viewer");

    const asAdmin = await signedIn(admin, "#/members");
    await asAdmin.page.getByText("3 members.").waitFor();
    expect(await rowOf(asAdmin.page, owner.email).textContent()).toContain("Only an owner changes an owner.");
    const offered = await asAdmin.page.getByLabel(`Role of ${viewer.email}`).locator("option").allTextContents();
    expect(offered).toEqual(["admin", "member", "viewer"]);
    expect(await asAdmin.page.getByLabel("Role", { exact: true }).locator("option").allTextContents()).toEqual(["admin", "member", "viewer"]);
    expect(asAdmin.errors).toEqual([]);

    const asViewer = await signedIn(viewer, "#/members");
    await asViewer.page.getByText("3 members.").waitFor();
    expect(await asViewer.page.getByRole("button", { name: /Change role|Remove|Create invitation/ }).count()).toBe(0);
    await asViewer.page.getByText("does not include org:admin").waitFor();
    await expectAccessible(asViewer.page, "members-viewer");
    expect(asViewer.errors).toEqual([]);
  }, 90_000);
});
