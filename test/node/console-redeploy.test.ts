/**
 * The console's environment-variables section says, next to the save, when the
 * environment's current deployment runs older variables than the ones saved
 * (needsRedeploy), with a link to deploy again; before the change it says nothing.
 * Chromium against the Node adapter as `npm start` runs it (runner off: the
 * current deployment is queued through the store and marked ready).
 */
import { and, eq } from "drizzle-orm";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertPinnedDeployment } from "../../functions/deployments/config-snapshot";
import { markReady } from "../../functions/deployments/store";
import { createKeyring } from "../../shared/crypto/keyring";
import { environments } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { apiAs, expectAccessible, launchChromium, newContext, screenshots, startConsoleServer, type ConsoleServer, watchPageErrors } from "../support/browser";
import { type Member, seedTenant } from "../support/harness";
import { TEST_SECRET_KEYS } from "../support/test-keys";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  server = await startConsoleServer("console_redeploy", { mail: false });
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
});

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await server?.close();
});

describe("env vars page: redeploy needed", () => {
  it("says a redeploy is needed once a saved variable differs from the current deployment's, with a link to deploy", async () => {
    const project = await apiAs<{ id: string }>(server.url, owner.token, "POST", "/projects", { name: "pinned" }, 201);
    await apiAs(server.url, owner.token, "PATCH", `/projects/${project.id}/env`, { upserts: [{ key: "GREETING", value: "hi" }] });
    const [production] = await server.harness.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, project.id), eq(environments.name, "production")));
    const keyring = await createKeyring(TEST_SECRET_KEYS);
    const d = await server.harness.db.transaction((tx) =>
      insertPinnedDeployment(
        tx,
        keyring,
        { orgId: owner.orgId, projectId: project.id, environmentId: production!.id, branch: "main", commitSha: "c".repeat(40) },
        new Date(),
        newId("dpl"),
      ),
    );
    await markReady(server.harness.db, d.id, new Date());

    const context = await newContext(browser, server.url);
    contexts.push(context);
    const page = await context.newPage();
    const errors = watchPageErrors(page);
    await page.goto("/");
    await page.getByLabel("Personal access token", { exact: true }).fill(owner.token);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    await page.goto(`/#/projects/${project.id}`);
    const greeting = page.getByLabel("Value of GREETING", { exact: true });
    await greeting.waitFor();
    const note = page.locator("p.redeploy");
    expect(await note.isHidden()).toBe(true);

    await greeting.fill("hello");
    await page.getByRole("button", { name: "Save variables" }).click();
    await page.getByText("Saved: 1 set, 0 deleted.").waitFor();
    await note.waitFor({ state: "visible" });
    expect(await note.textContent()).toMatch(/^Redeploy needed: the current deployment of production runs older variables\./);
    expect(await note.getByRole("link", { name: "deploy again" }).getAttribute("href")).toBe(`#/projects/${project.id}/deployments`);
    await expectAccessible(page, "project-redeploy-needed");
    await screenshots(page, "project-redeploy-needed");

    // Back to the deployed value: nothing to redeploy.
    await greeting.fill("hi");
    await page.getByRole("button", { name: "Save variables" }).click();
    await expect.poll(() => note.isHidden()).toBe(true);
    expect(errors).toEqual([]);
  });
});
