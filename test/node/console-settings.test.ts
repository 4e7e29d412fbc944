/**
 * The console's Settings page in Chromium against the Node adapter: every field of the Settings
 * API changed through the page and proved through GET /api/settings; the form's own checks (the
 * server id asked for and required only for the `server` target) and the API's 400s shown at the
 * field they name when the form's checks are bypassed in the DOM; the git clone token set,
 * replaced and cleared without ever coming back (a canary absent from the page, from every API
 * answer and from the database row); the per-organization rows; a read-only page without
 * settings:write and a real 403 explained; axe-core and screenshots at 1280 and 375 px.
 */
import type { Browser, BrowserContext, Page, Request, Response } from "playwright-core";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addMember } from "../../functions/identity/store";
import { workspaceSettings } from "../../shared/db/schema";
import { apiAs, expectAccessible, launchChromium, newContext, startConsoleServer, type ConsoleServer, watchPageErrors } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

/** A clone token that must never come back: searched for in the page, the API's answers and the row. */
const CANARY = "ghp_canary-clone-token-4f1d9a7c";
const CANARY_2 = "ghp_canary-replacement-8b2e6d10";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let member: Member;
let otherOrgId: string;
const contexts: BrowserContext[] = [];

const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200, org?: string) =>
  apiAs<T>(server.url, token, method, path, json, expected, org);

async function freshPage(): Promise<{ page: Page; errors: string[] }> {
  const context = await newContext(browser, server.url);
  contexts.push(context);
  const page = await context.newPage();
  return { page, errors: watchPageErrors(page) };
}

/** Opens #/settings, signs in by pasting the token (the page returns to Settings), waits for the forms. */
async function openSettings(page: Page, who: Member) {
  await page.goto("/#/settings");
  const token = page.getByLabel("Personal access token", { exact: true });
  await token.fill(who.token);
  await page.getByRole("button", { name: "Sign in with token" }).click();
  await page.getByRole("heading", { level: 1, name: "Settings" }).waitFor();
  await page.getByLabel("Default build mode", { exact: true }).waitFor();
}

/** The message tied to an input by its last aria-describedby id (where forms.js puts a field's error). */
async function errorAt(page: Page, label: string): Promise<string> {
  const input = page.getByLabel(label, { exact: true });
  await expect.poll(() => input.getAttribute("aria-invalid"), { message: `${label} marked invalid` }).toBe("true");
  const id = (await input.getAttribute("aria-describedby"))!.split(" ").at(-1);
  return (await page.locator(`[id="${id}"]`).textContent()) ?? "";
}

/** Everything the page holds as text: the markup and every input's current value (a password's is not in the markup). */
async function pageText(page: Page): Promise<string> {
  return page.evaluate(
    () =>
      document.documentElement.outerHTML +
      Array.from(document.querySelectorAll("input"))
        .map((i) => i.value)
        .join("\n"),
  );
}

beforeAll(async () => {
  server = await startConsoleServer("console_settings");
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  member = await seedMember(server.harness, owner.orgId, "member");
  // A second organization of the owner's: settings are kept per (organization, user).
  const other = await seedTenant(server.harness);
  otherOrgId = other.orgId;
  await addMember(server.harness.db, otherOrgId, owner.userId, "member");
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("settings page", () => {
  it("changes every field through the page and the API holds them; the server id only for the server target", async () => {
    // The default server must be one of the organization's build servers.
    const buildServer = await api<{ id: string }>(owner.token, "POST", "/servers", { name: "build-1" }, 201);
    const { page, errors } = await freshPage();
    const patches: Request[] = [];
    page.on("request", (r) => {
      if (r.method() === "PATCH") patches.push(r);
    });
    await openSettings(page, owner);
    const buildMode = page.getByLabel("Default build mode", { exact: true });
    const target = page.getByLabel("Default deploy target", { exact: true });
    const serverId = page.getByLabel("Default server", { exact: true });
    const strategy = page.getByLabel("Clone strategy", { exact: true });
    const forward = page.getByLabel("Forward my local git identity to build servers", { exact: true });
    // The defaults of a row never written.
    expect(await buildMode.inputValue()).toBe("auto");
    expect(await target.inputValue()).toBe("");
    expect(await serverId.isVisible()).toBe(false);
    expect(await strategy.inputValue()).toBe("prompt");
    expect(await forward.isChecked()).toBe(false);
    expect(await page.locator("#clone-token-state").textContent()).toBe("No clone token is saved.");
    expect(await page.getByRole("button", { name: "Remove saved token" }).isVisible()).toBe(false);
    await expectAccessible(page, "settings");

    // The server target asks for a server, and the form refuses it empty without calling the API.
    await buildMode.selectOption("server");
    await target.selectOption("server");
    await serverId.waitFor();
    await serverId.fill("   ");
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    expect(await errorAt(page, "Default server")).toMatch(/server target needs a server id/);
    expect(await serverId.evaluate((el) => el === document.activeElement)).toBe(true);
    expect(patches).toEqual([]);

    await serverId.fill(buildServer.id);
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    await page.getByText("Saved: build mode, deploy defaults.").waitFor();
    expect(await serverId.getAttribute("aria-invalid")).toBeNull();
    expect(patches.map((r) => [new URL(r.url()).pathname, r.postDataJSON()])).toEqual([
      ["/api/settings/build-mode", { buildMode: "server" }],
      ["/api/settings/deploy-defaults", { defaultDeployTarget: "server", defaultServerId: buildServer.id }],
    ]);

    await strategy.selectOption("remote-with-token");
    await forward.check();
    await page.getByRole("button", { name: "Save git preferences" }).click();
    await page.getByText("Saved: clone strategy, git identity forwarding.").waitFor();

    expect(await api(owner.token, "GET", "/settings")).toEqual({
      buildMode: "server",
      defaultDeployTarget: "server",
      defaultServerId: buildServer.id,
      cloneToken: { hasToken: false, setAt: null, asDefault: false },
      cloneStrategyPreference: "remote-with-token",
      forwardGitToServer: true,
    });

    // Nothing changed: nothing sent.
    const before = patches.length;
    await page.getByRole("button", { name: "Save git preferences" }).click();
    await page.getByText("No changes to save.").waitFor();
    expect(patches.length).toBe(before);

    // Another target drops the server id (the API stores it null), and the field is hidden again.
    await target.selectOption("cloud");
    expect(await serverId.isVisible()).toBe(false);
    await buildMode.selectOption("local");
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    await page.getByText("Saved: build mode, deploy defaults.").waitFor();
    expect(patches.at(-1)!.postDataJSON()).toEqual({ defaultDeployTarget: "cloud", defaultServerId: null });
    await strategy.selectOption("local");
    await forward.uncheck();
    await page.getByRole("button", { name: "Save git preferences" }).click();
    await page.getByText("Saved: clone strategy, git identity forwarding.").waitFor();
    expect(await api(owner.token, "GET", "/settings")).toMatchObject({
      buildMode: "local",
      defaultDeployTarget: "cloud",
      defaultServerId: null,
      cloneStrategyPreference: "local",
      forwardGitToServer: false,
    });

    // "No default" clears the target (null).
    await target.selectOption("");
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    await page.getByText("Saved: deploy defaults.").waitFor();
    expect((await api(owner.token, "GET", "/settings")).defaultDeployTarget).toBeNull();

    // A reload shows what the API holds.
    await page.reload();
    await buildMode.waitFor();
    expect(await buildMode.inputValue()).toBe("local");
    expect(await target.inputValue()).toBe("");
    expect(await strategy.inputValue()).toBe("local");
    expect(await forward.isChecked()).toBe(false);

    // The other organization has its own row, untouched.
    await page.getByLabel("Organization", { exact: true }).selectOption(otherOrgId);
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    await page.getByRole("link", { name: "Settings" }).click();
    await buildMode.waitFor();
    expect(await buildMode.inputValue()).toBe("auto");
    expect(await strategy.inputValue()).toBe("prompt");
    expect((await api(owner.token, "GET", "/settings", undefined, 200, otherOrgId)).buildMode).toBe("auto");
    expect(errors).toEqual([]);
  });

  it("sets, replaces and clears the clone token, which never comes back (page, API answers, database)", async () => {
    const { page, errors } = await freshPage();
    const answers: string[] = [];
    page.on("response", (r: Response) => {
      if (new URL(r.url()).pathname.startsWith("/api/"))
        void r.text().then(
          (t) => answers.push(t),
          () => {},
        );
    });
    await openSettings(page, owner);
    const token = page.getByLabel("Clone token", { exact: true });
    expect(await token.getAttribute("type")).toBe("password");
    await page.getByRole("button", { name: "Save token" }).click();
    expect(await errorAt(page, "Clone token")).toMatch(/Paste the token to save/);

    await token.fill(CANARY);
    await page.getByLabel("Use it by default for clones", { exact: true }).check();
    await page.getByRole("button", { name: "Save token" }).click();
    await page.getByText("Token saved.").waitFor();
    const state = page.locator("#clone-token-state");
    expect(await state.textContent()).toMatch(
      /^A clone token is saved \(set on .+\); it is used by default for clones\. It is stored encrypted and never shown\.$/,
    );
    const replace = page.getByLabel("New clone token (replaces the saved one)", { exact: true });
    expect(await replace.inputValue()).toBe("");
    const saved = await api(owner.token, "GET", "/settings");
    expect(saved.cloneToken).toMatchObject({ hasToken: true, asDefault: true });
    expect(Date.parse(saved.cloneToken.setAt)).toBeGreaterThan(Date.now() - 60_000);
    await expectAccessible(page, "settings-clone-token");

    // Replaced, no longer the default.
    await replace.fill(CANARY_2);
    await page.getByLabel("Use it by default for clones", { exact: true }).uncheck();
    await page.getByRole("button", { name: "Replace token" }).click();
    await page.getByText("Token replaced.").waitFor();
    expect((await api(owner.token, "GET", "/settings")).cloneToken).toMatchObject({ hasToken: true, asDefault: false });
    expect(await state.textContent()).toMatch(/it is not used by default for clones/);

    // After a reload the page knows only that a token is saved.
    await page.reload();
    await replace.waitFor();
    const [row] = await server.harness.db
      .select()
      .from(workspaceSettings)
      .where(and(eq(workspaceSettings.orgId, owner.orgId), eq(workspaceSettings.userId, owner.userId)));
    expect(row!.cloneTokenCiphertext).toBeTruthy();
    const getText = await (await fetch(`${server.url}/api/settings`, { headers: { authorization: `Bearer ${owner.token}` } })).text();
    for (const canary of [CANARY, CANARY_2]) {
      expect(await pageText(page), "page").not.toContain(canary);
      expect(getText, "GET /api/settings").not.toContain(canary);
      expect(
        answers.filter((a) => a.includes(canary)),
        "answers the page received",
      ).toEqual([]);
      expect(JSON.stringify(row), "the stored row").not.toContain(canary);
    }
    expect(answers.length).toBeGreaterThan(4);

    await page.getByRole("button", { name: "Remove saved token" }).click();
    await page.getByText("Token removed.").waitFor();
    expect(await state.textContent()).toBe("No clone token is saved.");
    expect(await page.getByRole("button", { name: "Remove saved token" }).isVisible()).toBe(false);
    expect(await token.evaluate((el) => el === document.activeElement)).toBe(true);
    expect((await api(owner.token, "GET", "/settings")).cloneToken).toEqual({ hasToken: false, setAt: null, asDefault: false });
    expect(errors).toEqual([]);
  });

  it("shows the API's 400 at the field it names when the form's checks are bypassed in the DOM", async () => {
    const { page, errors } = await freshPage();
    await openSettings(page, owner);
    const start = await api(owner.token, "GET", "/settings");

    // A build mode the select does not offer: the API names buildMode and its allowed values.
    await page.getByLabel("Default build mode", { exact: true }).evaluate((el) => {
      el.append(new Option("turbo", "turbo"));
      (el as HTMLSelectElement).value = "turbo";
    });
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    expect(await errorAt(page, "Default build mode")).toMatch(/buildMode must be one of "auto", "server", "local"/);
    expect(await page.getByLabel("Default build mode", { exact: true }).evaluate((el) => el === document.activeElement)).toBe(true);
    await expectAccessible(page, "settings-field-error");
    await page.getByLabel("Default build mode", { exact: true }).selectOption(start.buildMode);

    // A server id longer than the input lets anyone type (maxlength does not bind a script): the API's limit.
    await page.getByLabel("Default deploy target", { exact: true }).selectOption("server");
    await page.getByLabel("Default server", { exact: true }).evaluate((el) => {
      (el as HTMLInputElement).value = "s".repeat(201);
    });
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    expect(await errorAt(page, "Default server")).toMatch(/defaultServerId must be at most 200 characters/);
    // The build mode error of the try before is gone.
    expect(await page.getByLabel("Default build mode", { exact: true }).getAttribute("aria-invalid")).toBeNull();

    // A clone strategy the select does not offer: the API names `preference`, shown at the select.
    await page.getByLabel("Clone strategy", { exact: true }).evaluate((el) => {
      el.append(new Option("sometimes", "sometimes"));
      (el as HTMLSelectElement).value = "sometimes";
    });
    await page.getByRole("button", { name: "Save git preferences" }).click();
    expect(await errorAt(page, "Clone strategy")).toMatch(/preference must be one of "prompt", "local", "remote-with-token"/);

    // A token over the API's 4096 characters: shown at the token field, nothing stored.
    await page.getByLabel("Clone token", { exact: true }).evaluate((el) => {
      (el as HTMLInputElement).value = "t".repeat(4097);
    });
    await page.getByRole("button", { name: "Save token" }).click();
    expect(await errorAt(page, "Clone token")).toMatch(/token must be at most 4096 characters/);
    expect(await api(owner.token, "GET", "/settings")).toEqual(start);
    expect(errors).toEqual([]);
  });

  it("is read-only with the reason without settings:write", async () => {
    const { page, errors } = await freshPage();
    // Every role holds settings:write and a token with scopes cannot sign in, so a session
    // always has it: the page is shown the caller's real /api/me answer without the tag.
    await page.route("**/api/me", async (route) => {
      const res = await route.fetch();
      // Before sign-in /api/me answers 401: passed on as it is.
      if (!res.ok()) return route.fulfill({ response: res });
      const me = await res.json();
      await route.fulfill({ response: res, json: { ...me, tags: me.tags.filter((t: string) => t !== "settings:write") } });
    });
    await openSettings(page, member);
    expect(await page.locator("#settings-read-only-note").textContent()).toMatch(/role member\) does not include settings:write/);
    for (const label of ["Default build mode", "Default deploy target", "Clone strategy", "Forward my local git identity to build servers", "Clone token"])
      expect(await page.getByLabel(label, { exact: true }).isDisabled(), label).toBe(true);
    for (const name of ["Save build and deploy defaults", "Save git preferences", "Save token"])
      expect(await page.getByRole("button", { name }).isDisabled(), name).toBe(true);
    expect(await page.getByLabel("Default build mode", { exact: true }).inputValue()).toBe("auto");
    await expectAccessible(page, "settings-read-only");
    expect(errors).toEqual([]);
  });

  it("explains a 403 when the user was removed from the organization while the page was open", async () => {
    const { page, errors } = await freshPage();
    await openSettings(page, member);
    await api(owner.token, "DELETE", `/orgs/${owner.orgId}/members/${member.userId}`, undefined, 204);
    await page.getByLabel("Default build mode", { exact: true }).selectOption("local");
    await page.getByRole("button", { name: "Save build and deploy defaults" }).click();
    const alert = page.locator("form .form-alert");
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/^Not allowed: you are no longer a member of this organization/);
    expect(await alert.getAttribute("role")).toBe("alert");
    // The choice stays in the form, unsaved.
    expect(await page.getByLabel("Default build mode", { exact: true }).inputValue()).toBe("local");
    await expectAccessible(page, "settings-403");
    expect(errors).toEqual([]);
  });
});
