/**
 * The console's project page in Chromium against the Node adapter: the source line (git, none),
 * domains connected (a bad hostname's 400 at the field) and removed after a confirmation, the
 * project deleted after its preview; a viewer sees no manage controls. axe-core on each page.
 */
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiAs, expectAccessible, launchChromium, startConsoleServer, type ConsoleServer, signedInPage } from "../support/browser";
import { type Member, seedMember, seedTenant } from "../support/harness";

let server: ConsoleServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

const api = <T = any>(token: string, method: string, path: string, json?: unknown, expected = 200) => apiAs<T>(server.url, token, method, path, json, expected);

const signedIn = (who: Member, hash: string) => signedInPage(browser, server.url, contexts, who.token, hash);

beforeAll(async () => {
  server = await startConsoleServer("console_project_manage", { mail: false });
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("project page management", () => {
  it("shows the source, connects and removes a domain, deletes the project after the preview", async () => {
    const owner = await seedTenant(server.harness);
    const git = await api(owner.token, "POST", "/projects", { name: `shop-${Date.now()}`, gitOwner: "acme", gitRepo: "shop", gitBranch: "release" }, 201);
    const bare = await api(owner.token, "POST", "/projects", { name: `bare-${Date.now()}` }, 201);

    const { page, errors } = await signedIn(owner, `#/projects/${git.id}`);
    await page.getByRole("heading", { level: 1, name: git.name }).waitFor();
    await page.getByText("GitHub acme/shop, branch release").waitFor();
    await page.getByText("No domains connected.").waitFor();

    await page.getByLabel("Domain", { exact: true }).fill("not a host");
    await page.getByRole("button", { name: "Connect domain" }).click();
    await page.locator("input[name=domain][aria-invalid=true]").waitFor();

    await page.getByLabel("Domain", { exact: true }).fill("shop.example.com");
    await page.getByRole("button", { name: "Connect domain" }).click();
    await page.getByText("shop.example.com was connected and is the primary domain.").waitFor();
    await page.getByText("1 domain connected.").waitFor();
    await expectAccessible(page, "project-manage-owner");

    await page.getByRole("button", { name: "Remove shop.example.com", exact: true }).click();
    await page.getByText("Remove shop.example.com? The project stops answering on it at once").waitFor();
    await page.getByRole("button", { name: "Remove shop.example.com now" }).click();
    await page.getByText("shop.example.com was removed.").waitFor();
    await page.getByText("No domains connected.").waitFor();
    expect((await api(owner.token, "GET", `/projects/${git.id}/domains`)).items).toEqual([]);

    await page.goto(`/#/projects/${bare.id}`);
    await page.getByRole("heading", { level: 1, name: bare.name }).waitFor();
    await page.getByText("No source yet").waitFor();
    await page.getByRole("button", { name: "Delete project…" }).click();
    await page.getByRole("heading", { name: "Deleting removes" }).waitFor();
    await expectAccessible(page, "project-manage-delete");
    await page.getByLabel(/Type the project's name/).fill(bare.name);
    await page.getByRole("button", { name: `Delete ${bare.name} now` }).click();
    await page.getByText(`The project ${bare.name} was deleted.`).waitFor();
    await api(owner.token, "GET", `/projects/${bare.id}`, undefined, 404);
    expect(errors).toEqual([]);
  }, 120_000);

  it("a viewer sees no manage controls", async () => {
    const owner = await seedTenant(server.harness);
    const viewer = await seedMember(server.harness, owner.orgId, "viewer");
    const p = await api(owner.token, "POST", "/projects", { name: `view-${Date.now()}` }, 201);
    const { page, errors } = await signedIn(viewer, `#/projects/${p.id}`);
    await page.getByText("No domains connected.").waitFor();
    expect(await page.getByRole("button", { name: /Connect domain|Remove|Make primary|Delete project/ }).count()).toBe(0);
    await page.getByText("does not include project:admin").waitFor();
    await expectAccessible(page, "project-manage-viewer");
    expect(errors).toEqual([]);
  }, 90_000);
});
