/**
 * The console's deployments page in Chromium against the Node adapter on Postgres: the
 * test writes deployments and log lines straight into the server's database (as the runner
 * would) and watches them arrive on the open page without a reload: the chosen deployment's
 * build log until its `end` event, and the project's runtime logs. Also: ANSI escapes shown
 * as plain text, the page keeping at most 2,000 lines, the Deploy button's refusal shown at
 * the form, a viewer's page without the button (the reason shown), a switched organization
 * (the streams send X-Organization-Id), axe and screenshots at 1280 and 375 px. Row actions:
 * a queued deployment canceled, an older ready one promoted after the confirmation step (the
 * API shows it current), a 409 (its build pruned meanwhile) shown on its row, and a viewer
 * without either button. A long failure reason (escapes removed, its quoted lines behind a
 * disclosure) wraps instead of widening the table. Runtime lines of production and a preview:
 * each labelled with its environment and deployment, and the environment filter narrowing the
 * page and the live stream alike.
 */
import { and, eq } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertDeployment, markReady, markStatus } from "../../functions/deployments/store";
import { addMember } from "../../functions/identity/store";
import { appendLogLines, type LogKind, type LogStream } from "../../functions/logs/store";
import { deployments, environments } from "../../shared/db/schema";
import { sseSettings } from "../../shared/http/sse";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, WIDTHS, signedInPage } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let viewer: Member;
let projectId: string;
const contexts: BrowserContext[] = [];

const api = <T = any>(who: Member, method: string, path: string, json?: unknown, expected = 200) =>
  apiAs<T>(server.url, who.token, method, path, json, expected, who.orgId);

/** A `queued` deployment (of production unless named) written into the table, as POST /api/deployments would leave it. */
async function seedQueued(project: string, commit: string, at = new Date(), environment = "production") {
  const db = server.harness.db;
  const [env] = await db
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, project), eq(environments.name, environment)));
  const d = await db.transaction((tx) =>
    insertDeployment(
      tx,
      {
        orgId: env!.orgId,
        projectId: project,
        environmentId: env!.id,
        source: "git",
        gitProvider: "github",
        gitOwner: "acme",
        gitRepo: "shop",
        branch: "main",
        commitSha: commit,
      },
      at,
    ),
  );
  return d;
}

/** A deployment written into the table, then moved to `building` (as a runner claiming it would). */
async function seedBuilding(project: string, commit: string) {
  const d = await seedQueued(project, commit);
  await markStatus(server.harness.db, d.id, "building", new Date());
  return d;
}

/** A deployment the runner built and switched to: ready and its environment's current one. */
async function seedReady(project: string, commit: string, at: Date, environment = "production") {
  const d = await seedQueued(project, commit, at, environment);
  await markStatus(server.harness.db, d.id, "building", at);
  await markStatus(server.harness.db, d.id, "deploying", at);
  await markReady(server.harness.db, d.id, at);
  return d;
}

/** Lines appended through the store, as the runner's writer does (another connection than the server's). */
async function writeLines(
  target: { orgId: string; projectId: string; deploymentId: string | null },
  kind: LogKind,
  messages: string[],
  stream: LogStream = "stdout",
) {
  await appendLogLines(
    server.harness.db,
    messages.map((message) => ({ ...target, kind, stream, at: new Date(), message })),
  );
}

const openAs = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash, { signInFirst: true });

/** Lines written by another connection reach a stream at its next poll of the database (1 s): wait well past it. */
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 10_000, interval: 100 });

const buildLog = (page: Page) => page.locator("#build-log-lines");
const runtimeLog = (page: Page) => page.locator("#runtime-log-lines");

beforeAll(async () => {
  server = await startConsoleServer("console_deployments");
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  viewer = await seedMember(server.harness, owner.orgId, "viewer");
  projectId = (await api(owner, "POST", "/projects", { name: "shop" }, 201)).id;
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("deployments page", () => {
  it("is linked from the project page", async () => {
    const { page, errors } = await openAs(owner, `#/projects/${projectId}`);
    await page.getByRole("link", { name: "Deployments", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Deployments of shop" }).waitFor();
    expect(page.url()).toContain(`#/projects/${projectId}/deployments`);
    await page.getByText("No deployments yet.").waitFor();
    expect(errors).toEqual([]);
  });

  it("follows the build log live until its end event, and the runtime logs live", async () => {
    const d = await seedBuilding(projectId, "c".repeat(40));
    const target = { orgId: owner.orgId, projectId, deploymentId: d.id };
    await writeLines(target, "build", ["$ npm ci", "\u001b[32madded 42 packages\u001b[0m in 1s", "downloading 10%\rdownloading 100%"]);
    await writeLines(target, "runtime", ["listening on :3000"]);
    await writeLines(target, "runtime", ["warning: cache cold"], "stderr");

    const { page, errors } = await openAs(owner, `#/projects/${projectId}/deployments`);
    await page.getByRole("heading", { level: 1, name: "Deployments of shop" }).waitFor();
    const row = page.locator(`tr[data-deployment="${d.id}"]`);
    await row.waitFor();
    expect(await row.textContent()).toMatch(/building.*production.*acme\/shop @ main.*cccccccccccc/);
    expect(await page.getByRole("button", { name: `Show build log of ${d.id}` }).getAttribute("aria-pressed")).toBe("true");

    // What was there before the page opened, escapes removed and a redrawn line shown as its last state.
    await poll(() => buildLog(page).textContent()).toContain("added 42 packages in 1s");
    const built = (await buildLog(page).textContent())!;
    expect(built).toContain("$ npm ci");
    expect(built).toContain("downloading 100%");
    expect(built).not.toContain("downloading 10%\r");
    expect(built).not.toContain("\u001b");
    await poll(() => runtimeLog(page).textContent()).toContain("listening on :3000");
    expect(await runtimeLog(page).textContent()).toContain("[stderr] warning: cache cold");
    expect(await buildLog(page).getAttribute("aria-live")).toBe("off");
    expect(await runtimeLog(page).getAttribute("aria-live")).toBe("off");
    await poll(() => page.locator("#build-log-status").textContent()).toBe("Following the build log live.");
    await poll(() => page.locator("#runtime-log-status").textContent()).toBe("Following the runtime logs live.");
    await expectAccessible(page, "deployments-live");

    // New lines arrive without a reload, in order, each once.
    await writeLines(target, "build", ["$ npm run build", "<b>not markup</b>"]);
    await writeLines(target, "runtime", ["GET / 200"]);
    await poll(() => buildLog(page).textContent()).toContain("<b>not markup</b>");
    expect(await buildLog(page).locator("b").count()).toBe(0);
    await poll(() => runtimeLog(page).textContent()).toContain("GET / 200");
    const runtimeText = (await runtimeLog(page).textContent())!;
    expect(runtimeText.match(/listening on :3000/g)).toHaveLength(1);
    expect(runtimeText.indexOf("listening on :3000")).toBeLessThan(runtimeText.indexOf("GET / 200"));
    expect(await buildLog(page).locator(".line").count()).toBe(5);

    // The build finishes: its last lines, then the end event with the failure reason; the list is read again.
    await writeLines(target, "build", ["npm run build exited with code 1"], "stderr");
    await markStatus(server.harness.db, d.id, "failed", new Date(), "build failed: npm run build exited with code 1");
    const status = page.locator("#build-log-status");
    await poll(() => status.textContent()).toBe("Build finished: failed. build failed: npm run build exited with code 1");
    expect(await buildLog(page).textContent()).toContain("[stderr] npm run build exited with code 1");
    await poll(() => row.textContent()).toMatch(/failed.*build failed: npm run build exited with code 1/);
    // The runtime stream goes on after the build's ended.
    await writeLines(target, "runtime", ["still serving"]);
    await poll(() => runtimeLog(page).textContent()).toContain("still serving");
    await expectAccessible(page, "deployments-build-ended");
    expect(errors).toEqual([]);
  });

  it("shows a long failure reason without escapes, its quoted lines behind a disclosure, wrapped: the table never widens", async () => {
    const project = (await api(owner, "POST", "/projects", { name: "reasons" }, 201)).id;
    const d = await seedBuilding(project, "c".repeat(40));
    const esc = "\u001b";
    // As the runner composes it (about 1 KB), with a long unbroken path, and escapes as a reason stored before they were removed.
    const reason = [
      `build failed (exit code 1): npm run build; first error lines:`,
      `${esc}[31m[PARSE_ERROR] Unexpected token${esc}[39m`,
      `   ╭─[ src/main.js:61:17 ]`,
      `/app/node_modules/${"very-long-package-name/".repeat(12)}dist/index.mjs`,
      "last lines:",
      ...Array.from({ length: 8 }, (_, i) => `    at frame${i} (file:///app/node_modules/rolldown/dist/shared/src-${i}.mjs:${100 + i}:3)`),
    ].join("\n");
    await markStatus(server.harness.db, d.id, "failed", new Date(), reason);
    const { page, errors } = await openAs(owner, `#/projects/${project}/deployments`);
    const row = page.locator(`tr[data-deployment="${d.id}"]`);
    await poll(() => row.locator(".failure").textContent()).toBe("build failed (exit code 1): npm run build");
    const output = page.locator(`tr[data-deployment="${d.id}"] + tr.failure-output`);
    expect(await output.locator("pre").isVisible()).toBe(false);
    await output.getByText("Output quoted in the failure reason").click();
    await poll(() => output.locator("pre").textContent()).toMatch(/^first error lines:\n\[PARSE_ERROR\] Unexpected token\n {3}╭─\[ src\/main\.js:61:17 \]\n/);
    expect(await output.locator("pre").textContent()).toContain("last lines:\n    at frame0");
    expect(await page.locator("table.deployments").textContent()).not.toContain(esc);
    // The reason wraps: at either width the table is exactly as wide as without it (at its narrowest it scrolls inside its wrapper, never the page).
    for (const size of [WIDTHS.desktop, WIDTHS.phone]) {
      await page.setViewportSize(size);
      const { withReason, without } = await page.evaluate(() => {
        const width = () => document.querySelector("table.deployments")!.getBoundingClientRect().width;
        const parts = Array.from(document.querySelectorAll<HTMLElement>("table.deployments .failure, tr.failure-output"));
        const withReason = width();
        for (const part of parts) part.style.display = "none";
        const without = width();
        for (const part of parts) part.style.display = "";
        return { withReason, without };
      });
      expect(withReason, `at ${size.width} px`).toBe(without);
    }
    await page.setViewportSize(WIDTHS.desktop);
    await expectAccessible(page, "deployments-failure-reason");
    expect(errors).toEqual([]);
  });

  it("goes on after the last line shown when the server closes a stream, and stops its streams when the page is left", async () => {
    // The server in this process closes every stream after 2 s (its hour, shortened), as a proxy or a restart would.
    const maxStreamMs = sseSettings.maxStreamMs;
    sseSettings.maxStreamMs = 2_000;
    try {
      const { page, errors } = await openAs(owner, `#/projects/${projectId}/deployments`);
      const opened: Array<{ url: string; lastEventId: string | undefined }> = [];
      const ended: string[] = [];
      page.on("request", (r) => {
        if (r.url().includes("/logs/stream")) opened.push({ url: r.url(), lastEventId: r.headers()["last-event-id"] });
      });
      page.on("requestfailed", (r) => r.url().includes("/logs/stream") && ended.push(r.url()));
      page.on("requestfinished", (r) => r.url().includes("/logs/stream") && ended.push(r.url()));
      await poll(() => page.locator("#runtime-log-status").textContent()).toBe("Following the runtime logs live.");
      const target = { orgId: owner.orgId, projectId, deploymentId: null };
      await writeLines(target, "runtime", ["before the server closed"]);
      await poll(() => runtimeLog(page).textContent()).toContain("before the server closed");
      // Closed by the server, reconnected with Last-Event-ID: the next line arrives, the earlier one is not repeated.
      const runtimeStreams = () => opened.filter((o) => o.url.endsWith(`/projects/${projectId}/logs/stream`));
      await poll(() => runtimeStreams().length).toBeGreaterThanOrEqual(2);
      const [first, second] = runtimeStreams();
      expect(Number(second!.lastEventId)).toBeGreaterThan(Number(first!.lastEventId));
      await writeLines(target, "runtime", ["after the reconnect"]);
      await poll(() => runtimeLog(page).textContent()).toContain("after the reconnect");
      expect((await runtimeLog(page).textContent())!.match(/before the server closed/g)).toHaveLength(1);

      // Leaving the page ends its streams (no connection left open behind it).
      await page.getByRole("link", { name: "← shop" }).click();
      await page.getByRole("heading", { level: 1, name: "shop" }).waitFor();
      await poll(() => ended.length).toBe(opened.length);
      expect(errors).toEqual([]);
    } finally {
      sseSettings.maxStreamMs = maxStreamMs;
    }
  });

  it("keeps at most 2,000 lines of a chatty app on the page", async () => {
    const { page, errors } = await openAs(owner, `#/projects/${projectId}/deployments`);
    await poll(() => page.locator("#runtime-log-status").textContent()).toBe("Following the runtime logs live.");
    const target = { orgId: owner.orgId, projectId, deploymentId: null };
    await writeLines(
      target,
      "runtime",
      Array.from({ length: 2_100 }, (_, i) => `chatty line ${i + 1}`),
    );
    await poll(() => runtimeLog(page).textContent()).toContain("chatty line 2100");
    expect(await runtimeLog(page).locator(".line").count()).toBe(2_000);
    expect(await runtimeLog(page).textContent()).not.toContain("chatty line 100\n");
    expect(await page.locator("#runtime-log-count").textContent()).toMatch(/^Showing the last 2,000 lines; \d+ older ones were dropped from the page\.$/);
    expect(errors).toEqual([]);
  });

  it("shows why a deploy was refused at the form", async () => {
    const { page, errors } = await openAs(owner, `#/projects/${projectId}/deployments`);
    const deploy = page.getByRole("button", { name: "Deploy", exact: true });
    await deploy.waitFor();
    expect(await page.getByLabel("Environment", { exact: true }).inputValue()).toBe("production");
    await deploy.click();
    const alert = page.locator("form .form-alert");
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/no source to deploy/);
    expect(await alert.getAttribute("role")).toBe("alert");
    await expectAccessible(page, "deployments-deploy-refused");
    expect(errors).toEqual([]);
  });

  it("shows a viewer the deployments and logs without a Deploy button, and why", async () => {
    const { page, errors } = await openAs(viewer, `#/projects/${projectId}/deployments`);
    await page.getByRole("heading", { level: 1, name: "Deployments of shop" }).waitFor();
    await page.locator("#deploy-read-only").waitFor();
    expect(await page.locator("#deploy-read-only").textContent()).toMatch(/role in this organization is viewer, which does not include project:write/);
    expect(await page.getByRole("button", { name: "Deploy", exact: true }).count()).toBe(0);
    // A viewer holds project:deployment:list and project:read: the finished build's log and its end are shown.
    await poll(() => page.locator("#build-log-status").textContent()).toMatch(/^Build finished: failed\./);
    await poll(() => runtimeLog(page).textContent()).toContain("chatty line 2100");
    await expectAccessible(page, "deployments-viewer");
    expect(errors).toEqual([]);
  });

  it("follows the streams of the organization chosen in the switcher, not the default one", async () => {
    // The owner's default organization stays the first; the project lives in a second one they join.
    const other = await seedTenant(server.harness);
    await addMember(server.harness.db, other.orgId, owner.userId, "member");
    const otherProject = (await api(other, "POST", "/projects", { name: "elsewhere" }, 201)).id;
    const d = await seedBuilding(otherProject, "d".repeat(40));
    await writeLines({ orgId: other.orgId, projectId: otherProject, deploymentId: d.id }, "build", ["building elsewhere"]);

    const { page, errors } = await openAs(owner, "#/projects");
    await page.getByLabel("Organization", { exact: true }).selectOption(other.orgId);
    await page.getByRole("link", { name: "elsewhere" }).waitFor();
    // Without X-Organization-Id (what an EventSource would send) the cookie reads the default organization: 404.
    expect(await page.evaluate((id) => fetch(`/api/projects/${id}/logs/stream`).then((r) => r.status), otherProject)).toBe(404);
    await page.goto(`/#/projects/${otherProject}/deployments`);
    await poll(() => buildLog(page).textContent()).toContain("building elsewhere");
    await writeLines({ orgId: other.orgId, projectId: otherProject, deploymentId: d.id }, "runtime", ["elsewhere is up"]);
    await poll(() => runtimeLog(page).textContent()).toContain("elsewhere is up");
    expect(errors).toEqual([]);
  });
});

describe("runtime logs of several environments", () => {
  it("labels every line with its environment and deployment; the filter shows one environment's lines, live ones too", async () => {
    const project = (await api(owner, "POST", "/projects", { name: "two environments" }, 201)).id;
    await api(owner, "POST", `/projects/${project}/environments`, { name: "preview-x", branch: "feature-x" }, 201);
    const prod = await seedReady(project, "5".repeat(40), new Date(), "production");
    const preview = await seedReady(project, "6".repeat(40), new Date(), "preview-x");
    const of = (d: { id: string }) => ({ orgId: owner.orgId, projectId: project, deploymentId: d.id });
    const label = (d: { id: string }, environment: string) => `[${environment} dpl_…${d.id.slice(-4)}]`;
    await writeLines(of(prod), "runtime", ["prod up"]);
    await writeLines(of(preview), "runtime", ["preview up"]);
    await writeLines(of(preview), "runtime", ["preview warns"], "stderr");

    const { page, errors } = await openAs(owner, `#/projects/${project}/deployments`);
    const logReads: string[] = [];
    page.on("request", (r) => r.url().includes(`/projects/${project}/logs`) && logReads.push(r.url().slice(server.url.length)));
    const status = page.locator("#runtime-log-status");
    /** Each line's text without its time (HH:MM:SS, UTC). */
    const shown = async () => (await runtimeLog(page).locator(".line").allTextContents()).map((t) => t.replace(/^\d\d:\d\d:\d\d /, "").trimEnd());
    await poll(shown).toEqual([
      `${label(prod, "production")} prod up`,
      `${label(preview, "preview-x")} preview up`,
      `${label(preview, "preview-x")} [stderr] preview warns`,
    ]);
    // The label is its own element before the message, on every line.
    expect(await runtimeLog(page).locator(".line > .log-source").allTextContents()).toEqual([
      label(prod, "production"),
      label(preview, "preview-x"),
      label(preview, "preview-x"),
    ]);
    await poll(() => status.textContent()).toBe("Following the runtime logs live.");

    const filter = page.getByLabel("Show lines from", { exact: true });
    expect(await filter.locator("option").allTextContents()).toEqual(["All environments", "production", "preview-x"]);
    expect(await filter.inputValue()).toBe("");
    await expectAccessible(page, "deployments-runtime-labels");

    // The preview only: the region cleared and read again, the page and the stream narrowed by the API.
    logReads.length = 0;
    await filter.selectOption("preview-x");
    await poll(() => status.textContent()).toBe("Following the runtime logs of preview-x live.");
    expect(await shown()).toEqual([`${label(preview, "preview-x")} preview up`, `${label(preview, "preview-x")} [stderr] preview warns`]);
    expect(logReads).toEqual([`/api/projects/${project}/logs?limit=200&environment=preview-x`, `/api/projects/${project}/logs/stream?environment=preview-x`]);

    // Live lines after the switch: production's never reach the page, the preview's do.
    await writeLines(of(prod), "runtime", ["prod later"]);
    await writeLines(of(preview), "runtime", ["preview later"]);
    await poll(shown).toContain(`${label(preview, "preview-x")} preview later`);
    expect((await runtimeLog(page).textContent())!).not.toContain("prod");
    expect(await page.locator("#runtime-log-count").textContent()).toBe("3 lines.");

    // Back to every environment: both again, each once, in order.
    await filter.selectOption("");
    await poll(() => status.textContent()).toBe("Following the runtime logs live.");
    await poll(shown).toEqual([
      `${label(prod, "production")} prod up`,
      `${label(preview, "preview-x")} preview up`,
      `${label(preview, "preview-x")} [stderr] preview warns`,
      `${label(prod, "production")} prod later`,
      `${label(preview, "preview-x")} preview later`,
    ]);
    await writeLines(of(prod), "runtime", ["prod last"]);
    await poll(shown).toContain(`${label(prod, "production")} prod last`);
    await expectAccessible(page, "deployments-runtime-filtered");
    expect(errors).toEqual([]);
  });
});

describe("cancel and promote", () => {
  let rollbackProject: string;
  const rowOf = (page: Page, id: string) => page.locator(`tr[data-deployment="${id}"]`);
  const view = (id: string) => api<{ status: string; current: boolean }>(owner, "GET", `/deployments/${id}`);

  beforeAll(async () => {
    rollbackProject = (await api(owner, "POST", "/projects", { name: "rollback" }, 201)).id;
  });

  it("cancels a queued deployment; the API shows it canceled and the list is read again", async () => {
    const q = await seedQueued(rollbackProject, "e".repeat(40));
    const { page, errors } = await openAs(owner, `#/projects/${rollbackProject}/deployments`);
    const row = rowOf(page, q.id);
    await row.getByText("queued", { exact: true }).waitFor();
    expect(await page.getByRole("columnheader", { name: "Actions" }).count()).toBe(1);
    // Only Cancel applies to a queued deployment.
    expect(await row.getByRole("button", { name: `Promote ${q.id}` }).count()).toBe(0);
    await row.getByRole("button", { name: `Cancel ${q.id}`, exact: true }).click();
    await page.getByText(`${q.id} canceled.`, { exact: true }).waitFor();
    expect((await view(q.id)).status).toBe("canceled");
    await row.getByText("canceled", { exact: true }).waitFor();
    expect(await row.getByRole("button", { name: `Cancel ${q.id}`, exact: true }).count()).toBe(0);
    // Focus goes back to the row (its buttons were rebuilt).
    await expect.poll(() => page.evaluate(() => document.activeElement?.closest("tr")?.getAttribute("data-deployment"))).toBe(q.id);
    expect(errors).toEqual([]);
  });

  it("promotes an older ready deployment after a confirmation; a pruned build's 409 is shown on its row", async () => {
    const older = await seedReady(rollbackProject, "1".repeat(40), new Date(Date.now() - 60_000));
    const newer = await seedReady(rollbackProject, "2".repeat(40), new Date(Date.now() - 30_000));
    expect([(await view(older.id)).current, (await view(newer.id)).current]).toEqual([false, true]);

    const { page, errors } = await openAs(owner, `#/projects/${rollbackProject}/deployments`);
    const olderRow = rowOf(page, older.id);
    const newerRow = rowOf(page, newer.id);
    await newerRow.getByText("current", { exact: true }).waitFor();
    // The current one cannot be promoted; neither can be canceled.
    expect(await newerRow.getByRole("button", { name: `Promote ${newer.id}` }).count()).toBe(0);
    expect(await olderRow.getByRole("button", { name: `Cancel ${older.id}`, exact: true }).count()).toBe(0);

    // The confirmation step: "Keep current" goes back with nothing sent.
    const writes: string[] = [];
    page.on("request", (r) => r.method() !== "GET" && r.url().includes("/api/") && writes.push(r.url()));
    await olderRow.getByRole("button", { name: `Promote ${older.id}` }).click();
    await olderRow.getByText(`Serve ${older.id} as the current production deployment?`).waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe(`Yes, promote ${older.id}`);
    await expectAccessible(page, "deployments-promote-confirm");
    await olderRow.getByRole("button", { name: `Keep current (do not promote ${older.id})` }).click();
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe(`Promote ${older.id}`);
    expect(writes).toEqual([]);

    await olderRow.getByRole("button", { name: `Promote ${older.id}` }).click();
    await olderRow.getByRole("button", { name: `Yes, promote ${older.id}` }).click();
    await page.getByText(`${older.id} is now the current production deployment.`, { exact: true }).waitFor();
    expect(writes).toEqual([`${server.url}/api/deployments/${older.id}/promote`]);
    expect([(await view(older.id)).current, (await view(newer.id)).current]).toEqual([true, false]);
    await olderRow.getByText("current", { exact: true }).waitFor();
    expect(await newerRow.getByText("current", { exact: true }).count()).toBe(0);

    // The newer one is promotable now; its build is pruned (as the runner would) before the click: 409, shown on its row.
    const promoteNewer = newerRow.getByRole("button", { name: `Promote ${newer.id}` });
    await promoteNewer.waitFor();
    await server.harness.db.update(deployments).set({ prunedAt: new Date() }).where(eq(deployments.id, newer.id));
    await promoteNewer.click();
    await newerRow.getByRole("button", { name: `Yes, promote ${newer.id}` }).click();
    const refusal = newerRow.getByRole("alert");
    await refusal.waitFor();
    expect(await refusal.textContent()).toMatch(/^Not promoted: The deployment's build was removed .*deploy again instead$/);
    // The row was read again: it now says why there is no Promote button.
    await newerRow.getByText("Build removed: deploy again instead.").waitFor();
    expect(await promoteNewer.count()).toBe(0);
    expect([(await view(older.id)).current, (await view(newer.id)).current]).toEqual([true, false]);
    await expectAccessible(page, "deployments-promote-refused");
    // Refresh clears the refusal.
    await page.getByRole("button", { name: "Refresh", exact: true }).click();
    await expect.poll(() => refusal.count()).toBe(0);
    expect(errors).toEqual([]);
  });

  it("shows a viewer neither Cancel nor Promote", async () => {
    const q = await seedQueued(rollbackProject, "3".repeat(40));
    // Another ready one becomes current: the one promoted before is promotable again.
    await seedReady(rollbackProject, "4".repeat(40), new Date(Date.now() - 90_000));
    const { page, errors } = await openAs(viewer, `#/projects/${rollbackProject}/deployments`);
    await rowOf(page, q.id).waitFor();
    expect(await page.locator("#deploy-read-only").textContent()).toMatch(/cannot deploy, cancel or promote: .*viewer, which does not include project:write/);
    expect(await page.getByRole("button", { name: /^(Cancel|Promote) dpl_/ }).count()).toBe(0);
    expect(await page.getByRole("columnheader", { name: "Actions" }).count()).toBe(0);
    // The owner, on the same list, has both.
    const ownerPage = await openAs(owner, `#/projects/${rollbackProject}/deployments`);
    await ownerPage.page.getByRole("button", { name: `Cancel ${q.id}`, exact: true }).waitFor();
    expect(await ownerPage.page.getByRole("button", { name: /^Promote dpl_/ }).count()).toBeGreaterThan(0);
    expect(errors).toEqual([]);
    expect(ownerPage.errors).toEqual([]);
  });
});
