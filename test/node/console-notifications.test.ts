/**
 * The console's Notifications page in Chromium against the Node adapter as `npm start` runs it:
 * a channel's bad URL refused by the API and shown at its field, channels created (in-app, e-mail)
 * and verified, a grid cell toggled with exactly one upsert (and only that cell changed, proved
 * through the API), the unseen badge in the shell following an event posted through the API
 * without a reload and going back on "Mark seen", a member's read-only organization defaults
 * with the reason, the feed paged by "Show older alerts", a channel edited (renamed, an e-mail
 * address changed: unverified again, proved through the API; a webhook's bad URL shown at the edit
 * form's field, its secret never shown and kept when left empty), axe-core and screenshots at 1280
 * and 375 px (test-artifacts/console/).
 */
import { eq } from "drizzle-orm";
import type { Browser, BrowserContext, Page, Request } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decryptSecrets } from "../../functions/notifications/secrets";
import { createKeyring } from "../../shared/crypto/keyring";
import { notificationChannels } from "../../shared/db/schema";
import { apiAs, expectAccessible, launchChromium, newContext, startConsoleServer, type ConsoleServer, watchPageErrors } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";
import { TEST_SECRET_KEYS } from "../support/test-keys";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let member: Member;
let viewer: Member;
const contexts: BrowserContext[] = [];

const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200) => apiAs<T>(server.url, token, method, path, json, expected);

async function freshPage(): Promise<{ page: Page; errors: string[] }> {
  const context = await newContext(browser, server.url);
  contexts.push(context);
  const page = await context.newPage();
  return { page, errors: watchPageErrors(page) };
}

/** Signs in by the token form, then opens the Notifications page through the shell's link. */
async function openNotifications(page: Page, who: Member) {
  await page.goto("/#/sign-in");
  await page.getByLabel("Personal access token", { exact: true }).fill(who.token);
  await page.getByRole("button", { name: "Sign in with token" }).click();
  await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
  await page.getByRole("link", { name: /^Notifications/ }).click();
  await page.getByRole("heading", { level: 1, name: "Notifications" }).waitFor();
  await page.getByRole("heading", { level: 2, name: "Channels" }).waitFor();
}

/** The message tied to an input by its last aria-describedby id. */
async function fieldMessage(page: Page, label: string) {
  const input = page.getByLabel(label, { exact: true });
  await expect.poll(() => input.getAttribute("aria-invalid")).toBe("true");
  const id = (await input.getAttribute("aria-describedby"))!.split(" ").at(-1);
  return page.locator(`[id="${id}"]`).textContent();
}

type Sub = { id: string; category: string; channelId: string; enabled: boolean };
const cellsOf = (subs: Sub[]) => Object.fromEntries(subs.map((s) => [`${s.category} ${s.channelId}`, s.enabled]));

beforeAll(async () => {
  server = await startConsoleServer("console_notif");
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  member = await seedMember(server.harness, owner.orgId, "member");
  viewer = await seedMember(server.harness, owner.orgId, "viewer");
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("channels and the grid", () => {
  it("shows a webhook's bad URL at its field, creates e-mail and in-app channels, verifies one, deletes one", async () => {
    const { page, errors } = await freshPage();
    await openNotifications(page, owner);
    await expectAccessible(page, "notifications");

    await page.getByLabel("Kind", { exact: true }).selectOption("webhook");
    await page.getByLabel("Name", { exact: true }).fill("Ops hook");
    await page.getByLabel("Webhook URL", { exact: true }).fill("not a url");
    await page.getByRole("button", { name: "Add channel" }).click();
    expect(await fieldMessage(page, "Webhook URL")).toMatch(/config\.url must be an absolute URL/);
    expect(await page.getByLabel("Webhook URL", { exact: true }).evaluate((el) => el === document.activeElement)).toBe(true);
    await page.getByLabel("Webhook URL", { exact: true }).fill("ftp://example.test/hook");
    await page.getByRole("button", { name: "Add channel" }).click();
    await expect.poll(async () => fieldMessage(page, "Webhook URL")).toMatch(/config\.url must be https or http/);
    await expectAccessible(page, "notifications-field-error");

    // An e-mail channel: created unverified; "Mark verified" is PATCH {verified: true}.
    await page.getByLabel("Kind", { exact: true }).selectOption("email");
    await page.getByLabel("Name", { exact: true }).fill("Ops mail");
    await page.getByLabel("E-mail address", { exact: true }).fill("ops@example.test");
    await page.getByRole("button", { name: "Add channel" }).click();
    const mailRow = page.locator("table.channels tr").filter({ hasText: "Ops mail" });
    await mailRow.getByText("unverified").waitFor();
    await mailRow.getByRole("button", { name: "Mark verified (Ops mail)" }).click();
    await page.getByText("Ops mail is marked verified").waitFor();
    const channels = (await api(owner.token, "GET", "/notifications/channels")).items as Array<{ label: string; kind: string; verified: boolean; id: string }>;
    expect(channels.find((c) => c.label === "Ops mail")).toMatchObject({ kind: "email", verified: true });

    // A second in-app channel: verified from the start.
    await page.getByLabel("Kind", { exact: true }).selectOption("in_app");
    await page.getByLabel("Name", { exact: true }).fill("Desk feed");
    await page.getByRole("button", { name: "Add channel" }).click();
    await page.getByRole("columnheader", { name: /Desk feed/ }).waitFor();
    const desk = (await api(owner.token, "GET", "/notifications/channels")).items.find((c: { label: string }) => c.label === "Desk feed");
    expect(desk).toMatchObject({ kind: "in_app", verified: true });

    // A test send verifies an e-mail channel that received it (the SMTP test receiver).
    await page.getByLabel("Kind", { exact: true }).selectOption("email");
    await page.getByLabel("Name", { exact: true }).fill("Alerts mail");
    await page.getByLabel("E-mail address", { exact: true }).fill("alerts@example.test");
    await page.getByRole("button", { name: "Add channel" }).click();
    await page.getByRole("button", { name: "Send test (Alerts mail)" }).click();
    await page.getByText(/^Test to Alerts mail delivered.*the channel is now verified\.$/).waitFor();
    expect(server.smtp.messages.some((m) => m.to.includes("alerts@example.test"))).toBe(true);
    expect((await api(owner.token, "GET", "/notifications/channels")).items.find((c: { label: string }) => c.label === "Alerts mail").verified).toBe(true);

    // A webhook: its generated signing secret is shown once; a failed test send says why (the outbound guard).
    await page.getByLabel("Kind", { exact: true }).selectOption("webhook");
    await page.getByLabel("Name", { exact: true }).fill("Local hook");
    await page.getByLabel("Webhook URL", { exact: true }).fill("http://127.0.0.1:9/hook");
    await page.getByRole("button", { name: "Add channel" }).click();
    expect(await page.getByLabel("Signing secret of Local hook", { exact: true }).inputValue()).toMatch(/^whsec_/);
    await page.getByRole("button", { name: "Send test (Local hook)" }).click();
    const failure = page.locator("section[aria-labelledby=channels-heading] > .form-alert");
    await expect.poll(() => failure.textContent()).toMatch(/^Test to Local hook failed: .+/);
    expect(await page.locator("table.channels tr").filter({ hasText: "Local hook" }).getByText("unverified").count()).toBe(1);
    await expectAccessible(page, "notifications-channels");
    for (const label of ["Alerts mail", "Local hook"]) {
      await page.getByRole("button", { name: `Delete (${label})` }).click();
      await page.getByRole("button", { name: `Delete ${label} and its subscriptions` }).click();
      await page.getByText(`${label} deleted.`).waitFor();
    }

    // Delete takes a second, explicit step.
    await page.getByRole("button", { name: "Delete (Desk feed)" }).click();
    await page.getByRole("button", { name: "Delete Desk feed and its subscriptions" }).click();
    await page.getByText("Desk feed deleted.").waitFor();
    expect(await page.getByRole("columnheader", { name: /Desk feed/ }).count()).toBe(0);
    expect((await api(owner.token, "GET", "/notifications/channels")).items.map((c: { label: string }) => c.label).sort()).toEqual(["In-app", "Ops mail"]);
    expect(errors).toEqual([]);
  });

  it("toggles one grid cell with exactly one upsert, and only that cell changes", async () => {
    const { page, errors } = await freshPage();
    await openNotifications(page, owner);
    const cell = page.getByRole("checkbox", { name: "Backup failed on Ops mail", exact: true });
    await cell.waitFor();
    expect(await cell.isChecked()).toBe(false);
    // A category nothing produces yet is greyed and says so, after the produced ones; it can still be chosen.
    const grid = page.locator("table.grid-table tbody tr");
    expect(await grid.filter({ hasText: "Backup failed" }).getAttribute("class")).toBe("unproduced");
    expect(await grid.filter({ hasText: "Backup failed" }).getByText("not yet produced").count()).toBe(1);
    expect(await grid.filter({ hasText: "Deploy succeeded" }).getByText("not yet produced").count()).toBe(0);
    const rows = await grid.locator("th").evaluateAll((ths) => ths.map((th) => th.closest("tr")!.className));
    expect(rows.indexOf("unproduced")).toBe(4);
    expect(rows.slice(4).every((c) => c === "unproduced")).toBe(true);
    const before = cellsOf((await api(owner.token, "GET", "/notifications/subscriptions?limit=100")).items);
    const mail = (await api(owner.token, "GET", "/notifications/channels")).items.find((c: { label: string }) => c.label === "Ops mail");

    const writes: Request[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/api/") && r.method() !== "GET") writes.push(r);
    });
    await cell.check();
    await page.getByText("Saved: Backup failed on Ops mail is on.").waitFor();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.method()).toBe("PUT");
    expect(new URL(writes[0]!.url()).pathname).toBe("/api/notifications/subscriptions");
    expect(writes[0]!.postDataJSON()).toEqual({ category: "backup.failed", channelId: mail.id, enabled: true });

    const after = cellsOf((await api(owner.token, "GET", "/notifications/subscriptions?limit=100")).items);
    expect(after).toEqual({ ...before, [`backup.failed ${mail.id}`]: true });
    expect(await cell.isChecked()).toBe(true);
    await expectAccessible(page, "notifications-grid");
    expect(errors).toEqual([]);
  });
});

describe("editing a channel", () => {
  /** The open edit form (one at a time). */
  const editForm = (page: Page) => page.locator("form.channel-edit");
  type ChannelView = { id: string; label: string; verified: boolean; config: Record<string, unknown> };
  const channelOf = async (id: string) =>
    ((await api(owner.token, "GET", "/notifications/channels?limit=100")).items as ChannelView[]).find((c) => c.id === id)!;

  it("renames a channel and changes an e-mail address: the API shows both and the channel unverified", async () => {
    const mail = await api<ChannelView>(
      owner.token,
      "POST",
      "/notifications/channels",
      { kind: "email", label: "Pager mail", config: { address: "pager@example.test" } },
      201,
    );
    await api(owner.token, "PATCH", `/notifications/channels/${mail.id}`, { verified: true });
    const { page, errors } = await freshPage();
    await openNotifications(page, owner);
    const row = page.locator(`tr[data-channel="${mail.id}"]`);
    await row.getByText("verified", { exact: true }).waitFor();

    await row.getByRole("button", { name: "Edit (Pager mail)" }).click();
    const form = editForm(page);
    await form.getByRole("heading", { name: "Edit Pager mail" }).waitFor();
    // The form takes focus once it is on screen: read it until then.
    await expect.poll(() => page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.value)).toBe("Pager mail");
    expect(await form.getByLabel("E-mail address", { exact: true }).inputValue()).toBe("pager@example.test");
    await expectAccessible(page, "notifications-channel-edit");
    const patches: unknown[] = [];
    page.on("request", (r) => r.method() === "PATCH" && patches.push(r.postDataJSON()));
    await form.getByLabel("Name", { exact: true }).fill("On-call mail");
    await form.getByLabel("E-mail address", { exact: true }).fill("oncall@example.test");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("On-call mail saved; its destination changed, so it is unverified until a test send succeeds or you mark it verified.").waitFor();
    expect(patches).toEqual([{ label: "On-call mail", config: { address: "oncall@example.test" } }]);
    expect(await channelOf(mail.id)).toMatchObject({ label: "On-call mail", verified: false, config: { address: "oncall@example.test" } });
    // The row, the closed form and the focus settle with the page's next render.
    await expect.poll(() => row.textContent()).toMatch(/On-call mail.*oncall@example\.test.*unverified/);
    await expect.poll(() => editForm(page).count()).toBe(0);
    // Focus back on the channel's Edit button; the grid's column follows the new name.
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Edit (On-call mail)");
    await page.getByRole("columnheader", { name: /On-call mail/ }).waitFor();

    // A rename alone sends only the label and leaves the verification alone.
    await row.getByRole("button", { name: "Mark verified (On-call mail)" }).click();
    await page.getByText("On-call mail is marked verified").waitFor();
    await row.getByRole("button", { name: "Edit (On-call mail)" }).click();
    await editForm(page).getByLabel("Name", { exact: true }).fill("Night mail");
    await editForm(page).getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Night mail saved.", { exact: true }).waitFor();
    expect(patches.at(-1)).toEqual({ label: "Night mail" });
    expect(await channelOf(mail.id)).toMatchObject({ label: "Night mail", verified: true, config: { address: "oncall@example.test" } });
    expect(errors).toEqual([]);
  });

  it("shows a webhook's invalid URL at the edit form's field, never shows its secret, and keeps it when left empty", async () => {
    const hook = await api<ChannelView & { signingSecret: string }>(
      owner.token,
      "POST",
      "/notifications/channels",
      { kind: "webhook", label: "Build hook", config: { url: "http://127.0.0.1:9/build" } },
      201,
    );
    /** The signing secret as stored (decrypted with the server's keys): the API never returns it. */
    const storedSecret = async () => {
      const [row] = await server.harness.db.select().from(notificationChannels).where(eq(notificationChannels.id, hook.id));
      return (await decryptSecrets(await createKeyring(TEST_SECRET_KEYS), row!))?.signingSecret;
    };
    expect(await storedSecret()).toBe(hook.signingSecret);
    const { page, errors } = await freshPage();
    await openNotifications(page, owner);
    await page.getByRole("button", { name: "Edit (Build hook)" }).click();
    const form = editForm(page);
    const url = form.getByLabel("Webhook URL", { exact: true });
    expect(await url.inputValue()).toBe("http://127.0.0.1:9/build");
    // The secret is never shown back: empty, and empty means keep.
    const secret = form.getByLabel("Signing secret", { exact: true });
    expect(await secret.inputValue()).toBe("");
    expect(await form.textContent()).not.toContain("whsec_");
    await url.fill("not a url");
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => url.getAttribute("aria-invalid")).toBe("true");
    const id = (await url.getAttribute("aria-describedby"))!.split(" ").at(-1);
    expect(await page.locator(`[id="${id}"]`).textContent()).toMatch(/config\.url must be an absolute URL/);
    expect(await url.evaluate((el) => el === document.activeElement)).toBe(true);
    expect((await channelOf(hook.id)).config.url).toBe("http://127.0.0.1:9/build");
    await expectAccessible(page, "notifications-channel-edit-error");

    await url.fill("http://127.0.0.1:9/build-v2");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Build hook saved.", { exact: true }).waitFor();
    expect(await channelOf(hook.id)).toMatchObject({
      label: "Build hook",
      verified: false,
      config: { url: "http://127.0.0.1:9/build-v2", signingSecretConfigured: true },
    });
    // The empty secret field kept the stored secret (the config was sent without one).
    expect(await storedSecret()).toBe(hook.signingSecret);
    expect(errors).toEqual([]);
  });
});

describe("the unseen badge", () => {
  it("counts an event posted through the API without a reload, and goes back on Mark seen", async () => {
    const { page, errors } = await freshPage();
    await openNotifications(page, owner);
    const link = page.getByRole("link", { name: /^Notifications/ });
    const badge = link.locator(".unseen-badge");
    const startCount = Number((await api(owner.token, "GET", "/notifications/deliveries/unseen-count")).count);
    await expect.poll(() => badge.getAttribute("data-count")).toBe(String(startCount));
    // A marker in the page: a reload would lose it.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    const navigations: string[] = [];
    page.on("framenavigated", (f) => navigations.push(f.url()));

    // POST /api/notifications/events needs notifications:admin: the owner's token holds it.
    const result = await api(
      owner.token,
      "POST",
      "/notifications/events",
      { category: "deploy.failed", title: "Deploy of shop failed", message: "Exit code 1" },
      202,
    );
    expect(result.recipients).toBeGreaterThanOrEqual(1);
    const posted = Date.now();
    await expect.poll(() => badge.getAttribute("data-count"), { timeout: 8_000, interval: 100 }).toBe(String(startCount + 1));
    const lagMs = Date.now() - posted;
    expect(await badge.isVisible()).toBe(true);
    expect(await link.textContent()).toContain(`${startCount + 1} unseen`);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    expect(navigations.filter((u) => !u.includes("#/notifications"))).toEqual([]);
    console.log(`unseen badge updated ${lagMs} ms after the event was posted`);

    // The feed (on the open page) shows it too; Mark seen brings the badge back down.
    const entry = page.getByRole("listitem").filter({ hasText: "Deploy of shop failed" });
    await entry.waitFor();
    await expectAccessible(page, "notifications-unseen");
    await entry.getByRole("button", { name: "Mark seen: Deploy of shop failed" }).click();
    await expect.poll(() => badge.getAttribute("data-count"), { timeout: 5_000 }).toBe(String(startCount));
    expect((await api(owner.token, "GET", "/notifications/deliveries/unseen-count")).count).toBe(startCount);
    if (startCount === 0) expect(await badge.isHidden()).toBe(true);
    expect(errors).toEqual([]);
  });
});

describe("organization defaults", () => {
  it("an admin changes one; a member sees them read-only with the reason", async () => {
    const { page, errors } = await freshPage();
    await openNotifications(page, owner);
    const ownerBox = page.getByRole("checkbox", { name: "Member joined on by default", exact: true });
    expect(await ownerBox.isDisabled()).toBe(false);
    await ownerBox.check();
    await page.getByText(/Saved: Member joined is on by default/).waitFor();
    const defaults = (await api(owner.token, "GET", "/notifications/defaults")).items;
    expect(defaults.find((d: { category: string }) => d.category === "member.joined")).toEqual({
      category: "member.joined",
      defaultEnabled: true,
      overridden: true,
    });

    const other = await freshPage();
    await openNotifications(other.page, member);
    const box = other.page.getByRole("checkbox", { name: "Member joined on by default", exact: true });
    expect(await box.isChecked()).toBe(true);
    expect(await box.isDisabled()).toBe(true);
    expect(await other.page.locator("#defaults-read-only").textContent()).toMatch(/member, which does not include notifications:admin/);
    expect((await box.getAttribute("aria-describedby"))?.split(" ")).toContain("defaults-read-only");
    // The member's own grid stays editable (notifications:write).
    expect(await other.page.getByRole("checkbox", { name: "Deploy failed on In-app", exact: true }).isDisabled()).toBe(false);
    await expectAccessible(other.page, "notifications-member");
    // And the API refuses a member's PUT in any case.
    await api(member.token, "PUT", "/notifications/defaults", { category: "member.joined", defaultEnabled: false }, 403);
    expect(errors).toEqual([]);
    expect(other.errors).toEqual([]);
  });

  it("a viewer manages their own channels but not the defaults", async () => {
    const { page, errors } = await freshPage();
    await openNotifications(page, viewer);
    expect(await page.getByRole("checkbox", { name: "Deploy failed on In-app", exact: true }).isDisabled()).toBe(false);
    expect(await page.getByRole("checkbox", { name: "Deploy failed on by default", exact: true }).isDisabled()).toBe(true);
    expect(await page.locator("#defaults-read-only").textContent()).toMatch(/viewer, which does not include notifications:admin/);
    expect(errors).toEqual([]);
  });
});

describe("the feed", () => {
  it("lists the latest 20 alerts and shows older ones on request", async () => {
    // A member who joins now: their feed holds only these.
    const reader = await seedMember(server.harness, owner.orgId, "member");
    for (let i = 1; i <= 22; i++) await api(owner.token, "POST", "/notifications/events", { category: "build.failed", title: `Build ${i} failed` }, 202);
    const { page, errors } = await freshPage();
    await openNotifications(page, reader);
    const feed = page.getByRole("list", { name: "Alerts" });
    await feed.getByText("Build 22 failed").waitFor();
    expect(await feed.getByRole("listitem").count()).toBe(20);
    expect(await feed.getByText("Build 2 failed", { exact: true }).count()).toBe(0);
    await page.getByRole("button", { name: "Show older alerts" }).click();
    await feed.getByText("Build 1 failed", { exact: true }).waitFor();
    expect(await feed.getByRole("listitem").count()).toBe(22);
    expect(await page.getByRole("button", { name: "Show older alerts" }).isHidden()).toBe(true);
    expect(errors).toEqual([]);
  });
});
