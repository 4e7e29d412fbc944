/**
 * The console's Build servers page in Chromium against the Node adapter (issue 22, items 1 and 6):
 * an owner registers a server (a bad label's 400 shown at the labels field first), gets its runner
 * token once with the command attaching the machine, sees it offline, then online with what its
 * runner reported once that token heartbeats; edits it (a refused URL shown at its field), drains
 * and undrains it, and deletes it after a confirmation saying what follows (its token refused from
 * then on). A member and a viewer see the list read-only, with the reason. The deployments page
 * says why a queued deployment waits for a build server (no server, labels unmatched) and drops
 * the reason once one could take it; a claimed one is listed under what its server runs. axe-core and screenshots at 1280 and 375 px.
 */
import { and, eq } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertDeployment, markStatus } from "../../functions/deployments/store";
import { deployments, environments } from "../../shared/db/schema";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, signedInPage } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

const api = <T = any>(who: Member, method: string, path: string, json?: unknown, expected = 200) =>
  apiAs<T>(server.url, who.token, method, path, json, expected, who.orgId);
/** The runner protocol's heartbeat, as `wsp runner` sends it with the server's runner token. */
const heartbeat = (token: string, json: unknown = {}, expected = 200) => apiAs(server.url, token, "POST", "/runner/heartbeat", json, expected);

const signedIn = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash);

const cardOf = (page: Page, name: string) => page.locator("li.server", { has: page.getByRole("heading", { level: 3, name, exact: true }) });

/**
 * A deployment queued for a build server, written as POST /api/deployments leaves it: the console
 * server's projects have no source to deploy from (no git host, no upload), so the row is written
 * directly; what the page shows is the API's `waitingFor`, recomputed on every read.
 */
async function queueForServer(projectId: string, labels: string[] = []) {
  const db = server.harness.db;
  const [env] = await db
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, projectId), eq(environments.name, "production")));
  return db.transaction((tx) =>
    insertDeployment(
      tx,
      {
        orgId: env!.orgId,
        projectId,
        environmentId: env!.id,
        source: "git",
        gitProvider: "github",
        gitOwner: "acme",
        gitRepo: "shop",
        branch: "main",
        commitSha: "a".repeat(40),
        placement: "server",
        serverId: null,
        serverLabels: labels,
      },
      new Date(),
    ),
  );
}

beforeAll(async () => {
  server = await startConsoleServer("console_servers", { mail: false });
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("build servers page", () => {
  it("an owner registers a server (token and attach command shown once), drains, edits and deletes it", async () => {
    const owner = await seedTenant(server.harness);
    const { page, errors } = await signedIn(owner, "#/servers");
    await page.getByRole("heading", { level: 1, name: "Build servers" }).waitFor();
    // The shell focuses the page's heading once the page has rendered.
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe("H1");
    await page.getByText("No servers.").waitFor();
    await page.getByText(/No build server yet: register one below, then run the command/).waitFor();
    await expectAccessible(page, "servers-empty");

    // A label the API refuses: its 400 at the labels field, nothing registered.
    await page.getByLabel("Name", { exact: true }).fill("build-1");
    await page.getByLabel("Labels (optional)").fill("gpu, bad!label");
    await page.getByRole("button", { name: "Register server" }).click();
    const labels = page.getByLabel("Labels (optional)");
    await expect.poll(() => labels.getAttribute("aria-invalid")).toBe("true");
    await page.locator(".field-error", { hasText: "a label is 1-63 letters" }).waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("labels");
    expect((await api(owner, "GET", "/servers")).items).toEqual([]);

    await labels.fill("gpu, region=eu");
    await page.getByLabel("Public URL (optional)").fill("https://build-1.example.com");
    await page.getByRole("button", { name: "Register server" }).click();
    await page.getByRole("heading", { name: "Runner token of build-1" }).waitFor();
    const token = await page.getByLabel("Runner token", { exact: true }).inputValue();
    expect(token).toMatch(/^wsr_/);
    expect(await page.getByLabel("Command to attach").inputValue()).toBe(`WORKSPACE_RUNNER_TOKEN=${token} wsp runner --api ${server.url}`);
    // Held in the fields' values only, never in the document's markup.
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(token);
    await page.getByText("build-1 was registered.").waitFor();
    await page.getByText("1 server.").waitFor();
    const card = cardOf(page, "build-1");
    expect(await card.locator(".badge").first().textContent()).toBe("offline");
    for (const text of ["gpu", "region=eu", "https://build-1.example.com", "Never", "Not reported yet", "Nothing"])
      expect(await card.textContent()).toContain(text);
    await expectAccessible(page, "servers-registered");
    await page.getByRole("button", { name: "Done" }).click();
    await page.getByLabel("Runner token", { exact: true }).waitFor({ state: "detached" });

    // The token is the server's: its runner's heartbeat makes it online with what it reports.
    await heartbeat(token, { version: "1.2.3", capacity: 2, sandbox: { confined: true, cgroups: "v2" }, limits: { pidsMax: 512 } });
    await page.reload();
    await page.getByText("1 server.").waitFor();
    expect(await card.locator(".badge").first().textContent()).toBe("online");
    for (const text of ["1.2.3", "2 builds at once", "confined: yes", "cgroups: v2", "pidsMax: 512"]) expect(await card.textContent()).toContain(text);
    expect(await card.textContent()).not.toContain("Never");

    // Drain: it takes no new work; the button turns into Undrain.
    await card.getByRole("button", { name: "Drain build-1" }).click();
    await page.getByText("build-1 is drained: it takes no new work").waitFor();
    expect(await card.locator(".badge").first().textContent()).toBe("draining");
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe("Undrain build-1");
    expect((await api(owner, "GET", "/servers")).items[0]).toMatchObject({ status: "draining", draining: true });
    await expectAccessible(page, "servers-draining");

    // Edit: a refused URL at its field first; then renamed and the URL cleared.
    await card.getByRole("button", { name: "Edit build-1" }).click();
    const edit = page.getByRole("form", { name: "Edit build-1" });
    await edit.getByLabel("Name", { exact: true }).fill("build-eu");
    await edit.getByLabel("Public URL (optional)").fill("ftp://build-1.example.com");
    await edit.getByRole("button", { name: "Save build-1" }).click();
    await expect.poll(() => edit.getByLabel("Public URL (optional)").getAttribute("aria-invalid")).toBe("true");
    await edit.locator(".field-error", { hasText: "http or https" }).waitFor();
    await expectAccessible(page, "servers-edit-refused");
    await edit.getByLabel("Public URL (optional)").fill("");
    await edit.getByRole("button", { name: "Save build-1" }).click();
    await page.getByText("build-eu was saved.").waitFor();
    expect((await api(owner, "GET", "/servers")).items[0]).toMatchObject({ name: "build-eu", publicUrl: null, labels: ["gpu", "region=eu"] });

    const renamed = cardOf(page, "build-eu");
    await renamed.getByRole("button", { name: "Undrain build-eu" }).click();
    await page.getByText("build-eu takes new work again.").waitFor();
    expect(await renamed.locator(".badge").first().textContent()).toBe("online");

    // Delete asks first, saying what follows; Keep leaves it.
    await renamed.getByRole("button", { name: "Delete build-eu" }).click();
    await renamed.getByText(/Its runner token is refused from its next request; a build it holds goes back to the queue/).waitFor();
    await expectAccessible(page, "servers-delete-confirm");
    await renamed.getByRole("button", { name: "Keep build-eu" }).click();
    expect((await api(owner, "GET", "/servers")).items).toHaveLength(1);
    await renamed.getByRole("button", { name: "Delete build-eu" }).click();
    await renamed.getByRole("button", { name: "Delete build-eu now" }).click();
    await page.getByText("build-eu was deleted and its runner token revoked.").waitFor();
    await page.getByText("No servers.").waitFor();
    expect(await cardOf(page, "build-eu").count()).toBe(0);
    await heartbeat(token, {}, 401);
    expect(errors).toEqual([]);
  }, 180_000);

  it("a member and a viewer see the servers read-only, with the reason", async () => {
    const owner = await seedTenant(server.harness);
    await api(owner, "POST", "/servers", { name: "shared-runner", labels: ["arm64"] }, 201);
    for (const role of ["member", "viewer"] as const) {
      const who = await seedMember(server.harness, owner.orgId, role);
      const { page, errors } = await signedIn(who, "#/servers");
      await page.getByRole("heading", { level: 1, name: "Build servers" }).waitFor();
      await page.getByText("1 server.").waitFor();
      await page.getByText(`Read-only: your role (${role}) does not include org:admin`).waitFor();
      const card = cardOf(page, "shared-runner");
      expect(await card.textContent()).toContain("arm64");
      expect(await card.locator(".badge").first().textContent()).toBe("offline");
      expect(await page.getByRole("button", { name: /Edit|Drain|Delete|Register/ }).count()).toBe(0);
      expect(await page.getByLabel("Name", { exact: true }).count()).toBe(0);
      if (role === "viewer") await expectAccessible(page, "servers-read-only");
      expect(errors).toEqual([]);
    }
  }, 120_000);

  it("the deployments page says why a queued deployment waits for a build server", async () => {
    const owner = await seedTenant(server.harness);
    const project = await api<{ id: string }>(owner, "POST", "/projects", { name: "shop" }, 201);
    const anyServer = await queueForServer(project.id);
    const { page, errors } = await signedIn(owner, `#/projects/${project.id}/deployments`);
    await page.getByRole("heading", { level: 1, name: "Deployments of shop" }).waitFor();
    const row = (id: string) => page.locator(`tr[data-deployment="${id}"]`);
    await row(anyServer.id).getByText("Waiting for a build server: the organization has none yet.").waitFor();
    expect(await row(anyServer.id).getByRole("link", { name: "Build servers" }).getAttribute("href")).toBe("#/servers");

    // An online server without the label a second one asks for: that one waits, the first no longer does.
    const s = await api<{ id: string; token: string }>(owner, "POST", "/servers", { name: "cpu-box", labels: ["cpu"] }, 201);
    await heartbeat(s.token);
    const gpu = await queueForServer(project.id, ["gpu"]);
    await page.getByRole("button", { name: "Refresh" }).click();
    await row(gpu.id).getByText("Waiting for a build server: no online one carries the label gpu.").waitFor();
    expect(await row(anyServer.id).locator(".waiting").count()).toBe(0);
    expect((await api(owner, "GET", `/deployments/${gpu.id}`)).waitingFor).toBe("labels_unmatched");
    await expectAccessible(page, "deployments-waiting");

    // Once a server claims one, the Servers page lists it under what that server runs, linked to its project's deployments.
    await markStatus(server.harness.db, anyServer.id, "building", new Date());
    await server.harness.db.update(deployments).set({ claimedBy: s.id }).where(eq(deployments.id, anyServer.id));
    await page.goto("/#/servers");
    const runs = cardOf(page, "cpu-box").getByRole("link", { name: anyServer.id });
    await runs.waitFor();
    expect(await runs.getAttribute("href")).toBe(`#/projects/${project.id}/deployments`);
    expect(await cardOf(page, "cpu-box").textContent()).toContain("building");
    expect(errors).toEqual([]);
  }, 120_000);
});
