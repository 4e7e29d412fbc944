/**
 * The web console in Chromium against the Node adapter as `npm start` runs it: sign-in by an
 * e-mailed code (read from the test SMTP receiver) and by a pasted token, the organization
 * switcher, env vars edited through the merge PATCH (a changed value, a new key, a deletion,
 * the masked secret kept: proved through the API's export), the resources form's bounds, a
 * viewer's read-only forms and an explained 403, the CSRF refusal of a cross-origin form post,
 * axe-core on every page and screenshots at 1280 and 375 px (test-artifacts/console/).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, BrowserContext, Page, Request } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addMember } from "../../functions/identity/store";
import {
  apiAs,
  codeFor,
  expectAccessible,
  launchChromium,
  newContext,
  overflowsAtPhoneWidth,
  screenshots,
  startConsoleServer,
  type ConsoleServer,
  watchPageErrors,
} from "../support/browser";
import { and, eq } from "drizzle-orm";
import { deployments, environments } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { type Member, seedMember, seedTenant } from "../support/harness";

const MASK = "\u2022".repeat(8);
const SECRET = "s3cret-value-never-shown";

let server: ConsoleServer;
let browser: Browser;
let owner: Member;
let viewer: Member;
let member: Member;
let projectId: string;
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

/** Signs in by pasting the member's token, using the keyboard only from the top of the page. */
async function signInByToken(page: Page, who: Member, path = "/") {
  await page.goto(path);
  const token = page.getByLabel("Personal access token", { exact: true });
  await token.waitFor();
  for (let i = 0; i < 20 && !(await token.evaluate((el) => el === document.activeElement)); i++) await page.keyboard.press("Tab");
  await expect(token.evaluate((el) => el === document.activeElement)).resolves.toBe(true);
  await page.keyboard.type(who.token);
  await page.keyboard.press("Enter");
  try {
    await page.getByRole("heading", { level: 1, name: path.includes("/projects/") ? "shop" : "Projects" }).waitFor();
  } catch (e) {
    throw new Error(`Not signed in: the page shows ${page.url()}: ${((await page.locator("main").textContent()) ?? "").slice(0, 500)}`, { cause: e });
  }
}

beforeAll(async () => {
  server = await startConsoleServer("console");
  browser = await launchChromium();
  owner = await seedTenant(server.harness);
  viewer = await seedMember(server.harness, owner.orgId, "viewer");
  member = await seedMember(server.harness, owner.orgId, "member");
  const project = await api(owner.token, "POST", "/projects", { name: "shop" }, 201);
  projectId = project.id;
  await api(owner.token, "PATCH", `/projects/${projectId}/env`, {
    upserts: [
      { key: "KEEP_PLAIN", value: "same" },
      { key: "TO_CHANGE", value: "old" },
      { key: "TO_DELETE", value: "bye" },
      { key: "API_SECRET", value: SECRET, isSecret: true },
    ],
  });
  // A second organization where the owner is a viewer: the switcher's other choice.
  const other = await seedTenant(server.harness);
  otherOrgId = other.orgId;
  await addMember(server.harness.db, otherOrgId, owner.userId, "viewer");
  await api(other.token, "POST", "/projects", { name: "other-app" }, 201);
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await server?.close();
});

describe("static files", () => {
  it("serves the console at / with its CSP, types and revalidation, and nothing outside console/", async () => {
    const index = await fetch(`${server.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(index.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(index.headers.get("cache-control")).toBe("no-cache");
    const etag = index.headers.get("etag")!;
    expect((await fetch(`${server.url}/`, { headers: { "if-none-match": etag } })).status).toBe(304);
    const js = await fetch(`${server.url}/app.js`);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect((await fetch(`${server.url}/style.css`)).headers.get("content-type")).toBe("text/css; charset=utf-8");
    for (const path of ["/_headers", "/../package.json", "/%2e%2e/package.json", "/console/app.js", "/functions/app.ts", "/.gitignore"]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status, path).toBe(404);
      expect(res.headers.get("content-type"), path).toContain("application/problem+json");
    }
    // The API is untouched.
    expect((await fetch(`${server.url}/api/me`)).status).toBe(401);
  });
});

describe("sign-in", () => {
  it("signs in by an e-mailed code; a wrong code is shown at the code field", async () => {
    const { page, errors } = await freshPage();
    await page.goto("/");
    await page.waitForURL(/#\/sign-in$/);
    await page.getByLabel("Personal access token", { exact: true }).waitFor();
    await expectAccessible(page, "sign-in");

    const before = server.smtp.messages.length;
    await page.getByLabel("E-mail address", { exact: true }).fill(owner.email);
    await page.getByRole("button", { name: "Send code" }).click();
    const codeInput = page.getByLabel("Sign-in code", { exact: true });
    await codeInput.waitFor();
    const code = await codeFor(server.smtp, owner.email, before);

    await codeInput.fill(String((Number(code) + 1) % 1_000_000).padStart(6, "0"));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect.poll(() => codeInput.getAttribute("aria-invalid")).toBe("true");
    const described = (await codeInput.getAttribute("aria-describedby"))!.split(" ");
    const message = await page.locator(`[id="${described.at(-1)}"]`).textContent();
    expect(message).toMatch(/code is wrong or has expired/);
    await expectAccessible(page, "sign-in-wrong-code");

    await codeInput.fill(code);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(/#\/projects$/);
    await page.getByRole("link", { name: "shop" }).waitFor();
    expect(await page.getByRole("row").filter({ hasText: "shop" }).textContent()).toMatch(/created.*self-hosted/);
    await expectAccessible(page, "projects");
    expect(errors).toEqual([]);
  });

  it("signs in by token with the keyboard, switches organization (remembered) and signs out", async () => {
    const { page, errors } = await freshPage();
    await signInByToken(page, owner);
    const switcher = page.getByLabel("Organization", { exact: true });
    await switcher.selectOption(otherOrgId);
    await page.getByRole("link", { name: "other-app" }).waitFor();
    expect(await page.getByRole("link", { name: "shop" }).count()).toBe(0);
    await page.reload();
    await page.getByRole("link", { name: "other-app" }).waitFor();
    expect(await switcher.inputValue()).toBe(otherOrgId);
    await switcher.selectOption(owner.orgId);
    await page.getByRole("link", { name: "shop" }).waitFor();

    await page.getByRole("link", { name: "Settings" }).click();
    await page.getByRole("heading", { level: 1, name: "Settings" }).waitFor();
    await page.getByLabel("Default build mode", { exact: true }).waitFor();

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/#\/sign-in$/);
    expect((await page.request.get("/api/me")).status()).toBe(401);
    expect(errors).toEqual([]);
  });

  it("forgets a remembered organization the user no longer belongs to", async () => {
    const { page, errors } = await freshPage();
    await page.goto("/#/sign-in");
    await page.evaluate(() => localStorage.setItem("wsp.organizationId", "org_gone"));
    await signInByToken(page, owner);
    expect(await page.getByLabel("Organization", { exact: true }).inputValue()).toBe(owner.orgId);
    expect(await page.evaluate(() => localStorage.getItem("wsp.organizationId"))).toBeNull();
    expect(errors).toEqual([]);
  });

  it("shows a refused token at the token field", async () => {
    const { page } = await freshPage();
    await page.goto("/#/sign-in");
    const token = page.getByLabel("Personal access token", { exact: true });
    await token.fill("wsp_not-a-real-token");
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await expect.poll(() => token.getAttribute("aria-invalid")).toBe("true");
  });
});

describe("project page", () => {
  it("edits env vars through the merge PATCH: a changed value, a new key, a deletion, the masked secret kept", async () => {
    const { page, errors } = await freshPage();
    await signInByToken(page, owner, `/#/projects/${projectId}`);
    const secret = page.getByLabel("Value of API_SECRET", { exact: true });
    await secret.waitFor();
    expect(await secret.inputValue()).toBe(MASK);
    await expectAccessible(page, "project");

    await page.getByLabel("Value of TO_CHANGE", { exact: true }).fill("new");
    await page.getByRole("button", { name: "Delete TO_DELETE" }).click();
    await page.getByRole("button", { name: "Add variable" }).click();
    await page.getByLabel("Name of the new variable", { exact: true }).fill("ADDED");
    await page.getByLabel("Value of the new variable", { exact: true }).fill("fresh");
    // Focusing the secret selects the mask; leaving it untouched keeps the stored secret.
    await secret.focus();
    const patches: Request[] = [];
    page.on("request", (r) => {
      if (r.method() === "PATCH") patches.push(r);
    });
    await page.getByRole("button", { name: "Save variables" }).click();
    await page.getByText("Saved: 2 set, 1 deleted.").waitFor();

    expect(patches).toHaveLength(1);
    const sent = patches[0]!.postDataJSON();
    expect(sent).toEqual({
      environment: "production",
      upserts: [
        { key: "TO_CHANGE", value: "new", isSecret: false },
        { key: "ADDED", value: "fresh", isSecret: false },
      ],
      deletes: ["TO_DELETE"],
    });
    // The API's own view, secrets in the clear (export is the one route that shows them).
    const exported = await api(owner.token, "POST", `/projects/${projectId}/export`);
    const env = Object.fromEntries(exported.environments[0].env.map((v: { key: string; value: string; isSecret: boolean }) => [v.key, v]));
    expect(env).toEqual({
      ADDED: { key: "ADDED", value: "fresh", isSecret: false },
      API_SECRET: { key: "API_SECRET", value: SECRET, isSecret: true },
      KEEP_PLAIN: { key: "KEEP_PLAIN", value: "same", isSecret: false },
      TO_CHANGE: { key: "TO_CHANGE", value: "new", isSecret: false },
    });
    expect(await page.getByLabel("Value of ADDED", { exact: true }).inputValue()).toBe("fresh");

    // A server-side refusal lands at the field it names (upserts.0.value: longer than 32768).
    await page.getByLabel("Value of KEEP_PLAIN", { exact: true }).fill("x".repeat(32_769));
    await page.getByRole("button", { name: "Save variables" }).click();
    const tooLong = page.getByLabel("Value of KEEP_PLAIN", { exact: true });
    await expect.poll(() => tooLong.getAttribute("aria-invalid")).toBe("true");
    expect(await tooLong.evaluate((el) => el === document.activeElement)).toBe(true);
    await expectAccessible(page, "project-field-error");
    expect(errors).toEqual([]);
  });

  it("shows a degraded project's status and why, wrapped, and live again once its app answers", async () => {
    const [env] = await server.harness.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, projectId), eq(environments.name, "production")));
    // The current deployment's app is down (a crash restart in progress): no port.
    const id = newId("dpl");
    await server.harness.db
      .insert(deployments)
      .values({ id, orgId: owner.orgId, projectId, environmentId: env!.id, status: "ready", current: true, servedBy: "test-runner", port: null });
    try {
      const { page, errors } = await freshPage();
      await signInByToken(page, owner, `/#/projects/${projectId}`);
      await page.locator(".badge.status-degraded").waitFor();
      expect(await page.locator(".status-reason").textContent()).toContain(`The app of deployment ${id} does not answer now`);
      expect(await overflowsAtPhoneWidth(page)).toBe(false);
      await server.harness.db.update(deployments).set({ port: 9 }).where(eq(deployments.id, id));
      await page.reload();
      await page.locator(".badge.status-live").waitFor();
      expect(await page.locator(".status-reason").count()).toBe(0);
      expect(errors).toEqual([]);
    } finally {
      await server.harness.db.delete(deployments).where(eq(deployments.id, id));
    }
  });

  it("enforces the resources bounds in the form and saves a change", async () => {
    const { page, errors } = await freshPage();
    await signInByToken(page, owner, `/#/projects/${projectId}`);
    const cpu = page.getByLabel("Production CPU (cores)");
    await expect.poll(() => cpu.inputValue()).not.toBe("");
    const patches: string[] = [];
    page.on("request", (r) => {
      if (r.method() === "PATCH") patches.push(r.url());
    });
    const cases: Array<[string, string, RegExp]> = [
      ["Production CPU (cores)", "4.5", /between 0.1 and 4 cores/],
      ["Production memory (MB)", "100", /between 128 and 16384 MB/],
      ["Disk (GB)", "101", /between 1 and 100 GB/],
      ["Port", "0", /between 1 and 65535/],
      ["Build memory (MB)", "512.5", /whole number/],
    ];
    for (const [label, value] of cases) await page.getByLabel(label, { exact: true }).fill(value);
    await page.getByRole("button", { name: "Save resources" }).click();
    for (const [label, , message] of cases) {
      const input = page.getByLabel(label, { exact: true });
      expect(await input.getAttribute("aria-invalid"), label).toBe("true");
      const id = (await input.getAttribute("aria-describedby"))!.split(" ").at(-1);
      expect(await page.locator(`[id="${id}"]`).textContent(), label).toMatch(message);
    }
    expect(patches).toEqual([]);
    await screenshots(page, "project-resources-bounds");

    await page.getByLabel("Production CPU (cores)").fill("2.5");
    await page.getByLabel("Production memory (MB)").fill("1024");
    await page.getByLabel("Disk (GB)").fill("20");
    await page.getByLabel("Port", { exact: true }).fill("8080");
    await page.getByLabel("Build memory (MB)").fill("2048");
    await page.getByRole("button", { name: "Save resources" }).click();
    await page.getByText(/^Saved: production, diskGb, port\.$/).waitFor();
    const resources = await api(owner.token, "GET", `/projects/${projectId}/resources`);
    expect(resources).toMatchObject({ production: { cpuCores: 2.5, memoryMb: 1024 }, diskGb: 20, port: 8080 });
    expect(errors).toEqual([]);
  });

  it("creates a preview environment from the form; a taken name is shown at the name field; the env picker offers the new one", async () => {
    const { page, errors } = await freshPage();
    await signInByToken(page, owner, `/#/projects/${projectId}`);
    const environments = page.locator("ul.environments");
    await environments.getByText("production").waitFor();
    const name = `preview-${Date.now().toString(36)}`;
    await page.getByLabel("Name", { exact: true }).fill(name);
    await page.getByLabel("Branch", { exact: true }).fill("feature/login");
    await page.getByRole("button", { name: "Create environment" }).click();
    await page.getByText(`Environment ${name} created.`).waitFor();
    await environments.getByText(name).waitFor();
    expect(await environments.textContent()).toContain("preview of branch feature/login");
    const listed = await api(owner.token, "GET", `/projects/${projectId}/environments?limit=100`);
    expect(listed.items).toContainEqual(expect.objectContaining({ name, kind: "preview", branch: "feature/login" }));
    await expect.poll(() => page.locator("#env-environment option").allTextContents()).toContain(name);

    // The same name again: the API's 409 (or 400) is shown on the form, nothing else is created.
    await page.getByLabel("Name", { exact: true }).fill(name);
    await page.getByLabel("Branch", { exact: true }).fill("other");
    await page.getByRole("button", { name: "Create environment" }).click();
    await page
      .locator("form:has(legend:text('New preview environment')) [role=alert]:not([hidden]), form:has(legend:text('New preview environment')) .field-error")
      .first()
      .waitFor();
    expect(
      (await api(owner.token, "GET", `/projects/${projectId}/environments?limit=100`)).items.filter((e: { name: string }) => e.name === name),
    ).toHaveLength(1);
    await expectAccessible(page, "project-environments");
    expect(errors).toEqual([]);
  });

  it("shows a viewer read-only forms, with the reason", async () => {
    const { page, errors } = await freshPage();
    await signInByToken(page, viewer, `/#/projects/${projectId}`);
    await page.getByLabel("Value of KEEP_PLAIN", { exact: true }).waitFor();
    expect(await page.locator("#read-only-note").textContent()).toMatch(/viewer, which does not include project:write/);
    for (const label of ["Production CPU (cores)", "Port", "Value of KEEP_PLAIN", "Value of API_SECRET"])
      expect(await page.getByLabel(label, { exact: true }).isDisabled(), label).toBe(true);
    for (const name of ["Save resources", "Create environment", "Save variables", "Add variable"])
      expect(await page.getByRole("button", { name }).isDisabled(), name).toBe(true);
    await expectAccessible(page, "project-viewer");
    expect(errors).toEqual([]);
  });

  it("explains a 403 when the role was lowered while the page was open", async () => {
    const { page, errors } = await freshPage();
    await signInByToken(page, member, `/#/projects/${projectId}`);
    const value = page.getByLabel("Value of KEEP_PLAIN", { exact: true });
    await value.waitFor();
    await api(owner.token, "PATCH", `/orgs/${owner.orgId}/members/${member.userId}`, { role: "viewer" });
    await value.fill("changed by a demoted member");
    await page.getByRole("button", { name: "Save variables" }).click();
    const alert = page.locator("form .form-alert");
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/^Not allowed: Missing permission 'project:write'.*owner or admin can change your role/);
    expect(await alert.getAttribute("role")).toBe("alert");
    await expectAccessible(page, "project-403");
    expect(errors).toEqual([]);
  });
});

describe("CSRF", () => {
  let evil: Server;
  let evilUrl: string;
  beforeAll(async () => {
    // Another origin on the same host (same site, so the SameSite=Lax cookie is sent): only the Origin check stops it.
    evil = createServer((_req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(
        `<!doctype html><title>evil</title><form method="post" action="${server.url}/api/auth/logout" enctype="text/plain"><input name="a" value="b"></form><script>document.forms[0].submit()</script>`,
      );
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((r) => evil.close(() => r())));

  it("refuses a state-changing form post from another origin (403), and the session lives on", async () => {
    const { page } = await freshPage();
    await signInByToken(page, owner);
    const attack = await page.context().newPage();
    const [answer] = await Promise.all([attack.waitForResponse((r) => r.url() === `${server.url}/api/auth/logout`), attack.goto(evilUrl)]);
    expect(answer.status()).toBe(403);
    expect(answer.request().headers().origin ?? (await answer.request().headerValue("origin"))).toBe(evilUrl.slice(0, -1));
    expect((await page.request.get("/api/me")).status()).toBe(200);
    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
  });
});

describe("figures", () => {
  // Load times are measured by `npm run bench:console` (against a bare page's floor), not asserted here.
  it("the projects page, cold, transfers under 300 KB", async () => {
    const { page } = await freshPage();
    await signInByToken(page, owner);
    // Cold: a new context (empty HTTP cache) holding the same session cookie.
    const cookies = await page.context().cookies();
    const cold = await newContext(browser, server.url);
    contexts.push(cold);
    await cold.addCookies(cookies);
    const coldPage = await cold.newPage();
    const measure = async (p: Page) => {
      await p.getByRole("link", { name: "shop" }).waitFor();
      return p.evaluate(() => {
        const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
        const resources = performance.getEntriesByType("resource") as PerformanceResourceTiming[];
        return {
          domInteractiveMs: Math.round(nav.domInteractive),
          // Marked by the console when the projects list is on screen (GET /api/me and /api/projects/home answered).
          projectsShownMs: Math.round(performance.getEntriesByName("rendered projects")[0]!.startTime),
          transferredBytes: nav.transferSize + resources.reduce((n, r) => n + r.transferSize, 0),
          bodyBytes: nav.encodedBodySize + resources.reduce((n, r) => n + r.encodedBodySize, 0),
          requests: resources.length + 1,
        };
      });
    };
    await coldPage.goto("/#/projects");
    const coldFigures = await measure(coldPage);
    await coldPage.reload();
    const warmFigures = await measure(coldPage);
    console.log(`console figures: cold ${JSON.stringify(coldFigures)}, warm ${JSON.stringify(warmFigures)}`);
    expect(coldFigures.transferredBytes).toBeLessThan(300 * 1024);
  });
});

describe("an instance without e-mail", () => {
  let bare: ConsoleServer;
  beforeAll(async () => {
    bare = await startConsoleServer("console_nomail", { mail: false });
  }, 60_000);
  afterAll(() => bare?.close());

  it("says in a sentence that it cannot send e-mail, and offers the token form only", async () => {
    const context = await newContext(browser, bare.url);
    contexts.push(context);
    const page = await context.newPage();
    await page.goto("/#/sign-in");
    const token = page.getByLabel("Personal access token", { exact: true });
    await token.waitFor();
    await page.getByText("This server cannot send e-mail, so sign in with a personal access token.").waitFor();
    expect(await page.getByLabel("E-mail address", { exact: true }).isVisible()).toBe(false);
    await expectAccessible(page, "sign-in-no-mail");
  });
});
