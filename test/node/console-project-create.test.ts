/**
 * Creating a project in the console (#/projects/new) in Chromium against the Node adapter, with a
 * real git host (the global test git server, as the `gitea` provider): linking a repository (a bad
 * field's 400 at the field first), uploading a folder from the browser (packed in the page, then
 * session, relay, scan, ensure, build access), importing a local folder; the project page's git
 * card (repository, branch, deploy on push with the secret shown once); the overview's serving
 * and latest deployments apart; a viewer sees no create or manage controls. axe-core on each page.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { deployments, environments } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, signedInPage } from "../support/browser";
import { gitServerControl } from "../support/git-control";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
const git = gitServerControl(inject("gitServerUrl"));
const roots = realpathSync(mkdtempSync(join(tmpdir(), "console-create-roots-")));

const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200) => apiAs<T>(server.url, token, method, path, json, expected);

const signedIn = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash);

/** A small app folder on disk, for the browser's folder picker or a local import. */
function appFolder(parent: string, name: string): string {
  const dir = join(parent, name);
  mkdirSync(join(dir, "node_modules", "left-out"), { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name, scripts: { start: "node server.js" } }));
  writeFileSync(join(dir, "server.js"), "require('node:http').createServer((q, s) => s.end('hi')).listen(process.env.PORT);\n");
  writeFileSync(join(dir, "node_modules", "left-out", "index.js"), "module.exports = 1;\n");
  return dir;
}

beforeAll(async () => {
  server = await startConsoleServer("console_project_create", {
    mail: false,
    env: { GIT_GITEA_URL: inject("gitServerUrl"), OUTBOUND_ALLOW_PRIVATE: "true", LOCAL_ROOTS: roots },
  });
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
  rmSync(roots, { recursive: true, force: true });
});

describe("new project", () => {
  it("links a git repository (a bad field's 400 at the field first), then the git card turns deploy on push on and shows the secret once", async () => {
    const owner = await seedTenant(server.harness);
    const repo = await git.createRepo();
    const { page, errors } = await signedIn(owner, "#/projects");
    await page.getByText("No projects yet. Create one with New project").waitFor();
    await page.getByRole("link", { name: "New project" }).click();
    await page.getByRole("heading", { level: 1, name: "New project" }).waitFor();
    await expectAccessible(page, "project-new");

    await page.getByLabel("Link a git repository").check();
    const name = page.getByLabel("Project name", { exact: true });
    await page.getByRole("button", { name: "Create and link" }).click();
    await expect.poll(() => name.getAttribute("aria-invalid")).toBe("true");

    await name.fill(`linked-${Date.now()}`);
    await page.getByLabel("Git host").selectOption("gitea");
    const ownerField = page.getByLabel("Owner", { exact: true });
    await ownerField.fill("not an owner!");
    await page.getByLabel("Repository", { exact: true }).fill(repo.repo);
    await page.getByLabel("Deploy the branch now").uncheck();
    await page.getByRole("button", { name: "Create and link" }).click();
    await expect.poll(() => ownerField.getAttribute("aria-invalid")).toBe("true");
    expect(await ownerField.evaluate((el) => el === document.activeElement)).toBe(true);
    await page.getByText(/was created without a repository/).waitFor();
    await expectAccessible(page, "project-new-field-error");

    await ownerField.fill(repo.owner);
    await page.getByRole("button", { name: "Create and link" }).click();
    await page.getByText(`linked to ${repo.owner}/${repo.repo} (branch trunk)`).waitFor();
    // One project: the retry linked the one the refused link had created.
    const listed = await api(owner.token, "GET", "/projects");
    expect(listed.items).toHaveLength(1);
    const project = listed.items[0];
    expect(project.source.repository).toMatchObject({ provider: "gitea", owner: repo.owner, repo: repo.repo, branch: "trunk" });

    await page.getByRole("link", { name: `Open ${project.name}` }).click();
    await page.getByRole("heading", { level: 1, name: project.name }).waitFor();
    const card = page.locator("section.git-card");
    await card.getByRole("link", { name: `${repo.owner}/${repo.repo}` }).waitFor();
    await card.getByText("Not deployed: no production deployment").waitFor();
    await card.getByRole("button", { name: "Change branch…" }).click();
    await card.getByLabel("Deploy branch").selectOption("main");
    await card.getByRole("button", { name: "Set branch" }).click();
    await card.getByText("The deploy branch is main.").waitFor();

    await card.getByRole("button", { name: "Deploy on push", pressed: false }).click();
    const secret = card.getByLabel("Signing secret");
    await secret.waitFor();
    expect(await secret.inputValue()).toMatch(/^whsec_/);
    const hook = await api(owner.token, "GET", `/projects/${project.id}/git`);
    expect(hook.autoDeploy).toBe(true);
    expect(await card.getByLabel("Webhook URL").inputValue()).toBe(hook.webhookUrl);
    await expectAccessible(page, "project-git-secret");
    await card.getByRole("button", { name: "Done" }).click();
    expect(await card.getByLabel("Signing secret").count()).toBe(0);
    await card.getByRole("button", { name: "Deploy on push", pressed: true }).waitFor();

    // Off and on again: the hook stays, so no secret is shown a second time.
    await card.getByRole("button", { name: "Deploy on push", pressed: true }).click();
    await card.getByText("Deploy on push is off").waitFor();
    await card.getByRole("button", { name: "Deploy on push", pressed: false }).click();
    await card.getByText("Deploy on push is on.").waitFor();
    expect(await card.getByLabel("Signing secret").count()).toBe(0);

    await card.getByLabel("New clone token").fill("glpat-secret-value");
    await card.getByRole("button", { name: "Save token" }).click();
    await card.getByText("Clone token saved.").waitFor();
    expect(await api(owner.token, "GET", `/projects/${project.id}/clone-token`)).toMatchObject({ hasToken: true });
    expect(await page.content()).not.toContain("glpat-secret-value");
    await card.getByRole("button", { name: "Clear token" }).click();
    await card.getByText("Clone token cleared.").waitFor();
    await expectAccessible(page, "project-git");
    expect(errors).toEqual([]);
  }, 120_000);

  it("uploads a folder from the browser and reaches the project page with its deployment queued", async () => {
    const owner = await seedTenant(server.harness);
    const parent = mkdtempSync(join(tmpdir(), "console-upload-"));
    try {
      const dir = appFolder(parent, "hello-upload");
      const { page, errors } = await signedIn(owner, "#/projects/new");
      await page.getByRole("heading", { level: 1, name: "New project" }).waitFor();
      await page.getByLabel("Folder", { exact: true }).setInputFiles(dir);
      await page.getByText("hello-upload: 2 files").waitFor();
      await page.getByText("left out: hello-upload/node_modules").waitFor();
      expect(await page.getByLabel("Project name", { exact: true }).inputValue()).toBe("hello-upload");
      await page.getByRole("button", { name: "Upload and deploy" }).click();
      await page.getByText(/Created hello-upload from the folder hello-upload; deployment dpl_\w+ is queued\./).waitFor({ timeout: 30_000 });
      await expectAccessible(page, "project-new-uploaded");

      const [project] = (await api(owner.token, "GET", "/projects")).items;
      expect(project.source.kind).toBe("upload");
      const info = await api(owner.token, "GET", `/projects/${project.id}/info`);
      expect(info.build.framework).not.toBeNull();
      expect(info.build.lastDeployment.status).toBe("queued");

      await page.getByRole("link", { name: "Open hello-upload" }).click();
      await page.getByRole("heading", { level: 1, name: "hello-upload" }).waitFor();
      await page.getByText("Uploaded folders").waitFor();
      await page.getByText("none: no deployment has gone live yet").waitFor();
      const latest = page.locator("dt:text-is('Latest deployment') + dd");
      await latest.getByText(info.build.lastDeployment.id).waitFor();
      await latest.getByText("In progress.").waitFor();
      await page.locator("section.git-card").getByText("No repository linked.").waitFor();
      await expectAccessible(page, "project-uploaded");
      expect(errors).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }, 120_000);

  it("imports a folder on the server's machine (a path outside the roots refused at the field)", async () => {
    const owner = await seedTenant(server.harness);
    const dir = appFolder(roots, `local-${Date.now()}`);
    const { page, errors } = await signedIn(owner, "#/projects/new");
    await page.getByLabel("Import a folder on the server's machine").check();
    await page.getByLabel("Project name", { exact: true }).fill("from-disk");
    const path = page.getByLabel("Folder path");
    await path.fill("/etc");
    await page.getByLabel("Deploy it now").uncheck();
    await page.getByRole("button", { name: "Import folder" }).click();
    await expect.poll(() => path.getAttribute("aria-invalid")).toBe("true");
    await path.fill(dir);
    await page.getByRole("button", { name: "Import folder" }).click();
    await page.getByText(`Created from-disk from ${dir}.`).waitFor();
    await expectAccessible(page, "project-new-local");
    await page.getByRole("link", { name: "Open from-disk" }).click();
    await page.getByText(`Local folder ${dir}`).waitFor();
    expect(errors).toEqual([]);
  }, 90_000);
});

describe("project overview", () => {
  it("shows the deployment serving and a newer failed one apart, and the free route as the edge serves it", async () => {
    const owner = await seedTenant(server.harness);
    const p = await api(owner.token, "POST", "/projects", { name: `served-${Date.now()}` }, 201);
    expect(p.routes.free.state).toBe("pending");
    const [env] = await server.harness.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, p.id), eq(environments.name, "production")));
    const serving = newId("dpl");
    // Ids sort by their time: the failed one is the newer, the latest.
    await new Promise((r) => setTimeout(r, 5));
    const failed = newId("dpl");
    await server.harness.db.insert(deployments).values([
      { id: serving, orgId: owner.orgId, projectId: p.id, environmentId: env!.id, status: "ready", current: true, servedBy: "test-runner", port: 9 },
      { id: failed, orgId: owner.orgId, projectId: p.id, environmentId: env!.id, status: "failed", current: false },
    ]);
    const { page, errors } = await signedIn(owner, `#/projects/${p.id}`);
    await page.getByRole("heading", { level: 1, name: p.name }).waitFor();
    await page.locator(".badge.status-live").waitFor();
    await page.locator("dt:text-is('Current deployment') + dd").getByText(serving).waitFor();
    const latest = page.locator("dt:text-is('Latest deployment') + dd");
    await latest.getByText(failed).waitFor();
    await latest.getByText("It did not go live; the current deployment keeps serving.").waitFor();
    const app = page.getByRole("link", { name: new RegExp(`^http://${p.slug}\\.apps\\.test:\\d+$`) });
    await app.waitFor();
    await page.getByText("routed to this project by the edge").waitFor();
    expect((await api(owner.token, "GET", `/projects/${p.id}`)).routes.free.state).toBe("synced");
    await expectAccessible(page, "project-overview");
    expect(errors).toEqual([]);
  }, 90_000);
});

describe("a viewer", () => {
  it("sees no create or manage controls", async () => {
    const owner = await seedTenant(server.harness);
    const viewer = await seedMember(server.harness, owner.orgId, "viewer");
    const repo = await git.createRepo();
    const p = await api(owner.token, "POST", "/projects", { name: `viewed-${Date.now()}` }, 201);
    await api(owner.token, "POST", `/projects/${p.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
    const { page, errors } = await signedIn(viewer, "#/projects");
    await page.getByRole("link", { name: p.name }).waitFor();
    expect(await page.getByRole("link", { name: "New project" }).count()).toBe(0);

    await page.goto("/#/projects/new");
    await page.getByText("cannot create projects (it needs project:write)").waitFor();
    expect(await page.locator("form").count()).toBe(0);

    await page.goto(`/#/projects/${p.id}`);
    const card = page.locator("section.git-card");
    await card.getByRole("link", { name: `${repo.owner}/${repo.repo}` }).waitFor();
    await card.getByText("Setting it needs project:admin").waitFor();
    expect(await card.getByRole("button").count()).toBe(0);
    expect(await card.locator("input, select").count()).toBe(0);
    // A viewer records nothing: the free route reads as stored.
    await page.getByText("not confirmed as served yet").waitFor();
    await expectAccessible(page, "project-git-viewer");
    expect(errors).toEqual([]);
  }, 90_000);
});
