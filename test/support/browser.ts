/**
 * The web console in a real browser: Debian's Chromium (/usr/bin/chromium, installed by
 * .ci/run when missing) driven by playwright-core, which downloads nothing; the
 * self-hosted server started as `npm start` starts it (startSelfHosted), on a fresh
 * Postgres database, with SMTP to a test receiver so sign-in codes can be read.
 *
 * Also: axe-core run inside the page (serious and critical violations returned),
 * screenshots at desktop and phone width into test-artifacts/console/ (gitignored),
 * and the page's own errors (uncaught exceptions, console errors, CSP violations)
 * collected so a test can assert there were none.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { type AddressInfo, createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { expect, inject } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { type FreshDatabase, freshDatabase } from "./fresh-database";
import type { Harness } from "./harness";
import { type HttpReceiver, type SmtpReceiver, startHttpReceiver, startSmtpReceiver } from "./receivers";
import { TEST_SECRET_KEYS } from "./test-keys";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** TOOLCHAIN.md's flags: no sandbox (root in a container), nothing reaching for the network. */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];
export const ARTIFACTS = resolve(dirname(fileURLToPath(import.meta.url)), "../../test-artifacts/console");
export const WIDTHS = { desktop: { width: 1280, height: 900 }, phone: { width: 375, height: 812 } } as const;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
}

export interface ConsoleServer {
  url: string;
  smtp: SmtpReceiver;
  /** The server's database, for seeding users (test/support/harness.ts helpers take `{db}`). */
  harness: Harness;
  close(): Promise<void>;
}

/**
 * startSelfHosted as `npm start` runs it (runner off: no app is deployed here), mail to a test
 * SMTP receiver unless `mail` is false (an instance without e-mail, where sign-in is by token).
 * `env` adds settings (a git host's base URL, LOCAL_ROOTS).
 */
export async function startConsoleServer(prefix: string, opts: { mail?: boolean; env?: Record<string, string> } = {}): Promise<ConsoleServer> {
  const pgUrl = inject("pgUrl");
  if (!pgUrl) throw new Error("The console browser tests need Postgres at 127.0.0.1:5432 (see TOOLCHAIN.md)");
  const smtp = await startSmtpReceiver();
  let db: FreshDatabase | undefined;
  let database: PostgresDatabase | undefined;
  let server: RunningServer | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-data-`));
  const close = async () => {
    await server?.close();
    await database?.close();
    await db?.drop();
    await smtp.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    db = await freshDatabase(pgUrl, prefix, { migrate: true });
    const config = loadNodeConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      DATABASE_URL: db.url,
      SECRET_KEYS: TEST_SECRET_KEYS,
      LOG_LEVEL: "silent",
      SHARED_DOMAIN: "apps.test",
      RUNNER: "off",
      ...(opts.mail === false ? {} : { SMTP_URL: smtp.url, EMAIL_FROM: "Workspace <sign-in@workspace.test>" }),
      ...opts.env,
    });
    server = await startSelfHosted(config, () => {});
    database = await openPostgres(db.url, { migrate: false, max: 2 });
    return { url: server.url, smtp, harness: { db: database.db } as Harness, close };
  } catch (e) {
    await close();
    throw e;
  }
}

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const WORKER_READY_MS = 60_000;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

export interface ConsoleWorker {
  url: string;
  /** The HTTP e-mail API the Worker mails sign-in codes through (EMAIL_API_URL). */
  email: HttpReceiver;
  harness: Harness;
  /** What wrangler printed (capped), for a failure's message. */
  output(): string;
  close(): Promise<void>;
}

/**
 * The Worker under `wrangler dev` (as `npm run dev:worker` runs it: the console from wrangler.toml's
 * `[assets]`, the API from the Worker), on a fresh Postgres database through the run's Neon
 * WebSocket proxy, with e-mail through an HTTP e-mail API that is a test receiver.
 */
export async function startConsoleWorker(prefix: string): Promise<ConsoleWorker> {
  const pgUrl = inject("pgUrl");
  const wsProxyUrl = inject("wsProxyUrl");
  if (!pgUrl || !wsProxyUrl) throw new Error("The Worker console tests need Postgres at 127.0.0.1:5432 and the run's WebSocket proxy");
  const email = await startHttpReceiver([], { status: 200, headers: { "content-type": "application/json" }, body: '{"id":"test"}' });
  const persist = mkdtempSync(join(tmpdir(), `${prefix}-wrangler-`));
  let db: FreshDatabase | undefined;
  let database: PostgresDatabase | undefined;
  let child: ReturnType<typeof spawn> | undefined;
  let output = "";
  const close = async () => {
    if (child?.pid && child.exitCode === null) {
      const exited = new Promise<void>((r) => child!.once("exit", () => r()));
      // wrangler starts workerd beside it: end the whole process group it leads.
      process.kill(-child.pid, "SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) process.kill(-child.pid, "SIGKILL");
    }
    await database?.close();
    await db?.drop();
    await email.close();
    rmSync(persist, { recursive: true, force: true });
  };
  try {
    db = await freshDatabase(pgUrl, prefix, { migrate: true });
    const port = await freePort();
    const vars: Record<string, string> = {
      DATABASE_URL: db.url,
      NEON_WS_PROXY: wsProxyUrl,
      SECRET_KEYS: TEST_SECRET_KEYS,
      EMAIL_API_KEY: "test-key",
      EMAIL_API_URL: `${email.origin}/emails`,
      EMAIL_FROM: "Workspace <sign-in@workspace.test>",
      OUTBOUND_ALLOW_PRIVATE: "true",
    };
    const wrangler = join(dirname(createRequire(import.meta.url).resolve("wrangler/package.json")), "bin", "wrangler.js");
    const args = ["dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(await freePort()), "--persist-to", persist];
    args.push("--show-interactive-dev-session=false", "--live-reload=false");
    for (const [k, v] of Object.entries(vars)) args.push("--var", `${k}:${v}`);
    child = spawn(process.execPath, [wrangler, ...args], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", CI: "true" },
    });
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-20_000);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    const url = `http://127.0.0.1:${port}`;
    // Ready when the API answers through the Worker (an unauthenticated 401) and the console through the assets.
    const deadline = Date.now() + WORKER_READY_MS;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${output}`);
      const status = await fetch(`${url}/api/me`).then(
        (r) => r.status,
        () => 0,
      );
      if (status === 401) break;
      if (Date.now() > deadline) throw new Error(`wrangler dev did not answer within ${WORKER_READY_MS} ms:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    database = await openPostgres(db.url, { migrate: false, max: 2 });
    return { url, email, harness: { db: database.db } as Harness, output: () => output, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** The sign-in code last sent to `email` through the HTTP e-mail API receiver. */
export async function codeFromEmailApi(receiver: HttpReceiver, email: string, after = 0, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const sent = receiver.recorder.hits
      .slice(after)
      .map((h) => JSON.parse(h.body) as { to: string | string[]; subject: string })
      .findLast((m) => [m.to].flat().includes(email));
    const code = sent && /Sign-in code: ([0-9]{6})/.exec(sent.subject)?.[1];
    if (code) return code;
    if (Date.now() > deadline) throw new Error(`No sign-in code sent to ${email} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The sign-in code last mailed to `email` (waits for it to arrive). */
export async function codeFor(smtp: SmtpReceiver, email: string, after = 0, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const mail = smtp.messages.slice(after).findLast((m) => m.to.includes(email));
    const code = mail && /Sign-in code: ([0-9]{6})/.exec(mail.subject)?.[1];
    if (code) return code;
    if (Date.now() > deadline) throw new Error(`No sign-in code mailed to ${email} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** What went wrong inside a page: uncaught errors, console errors (CSP violations show there). */
export function watchPageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    // A refused API call logs "Failed to load resource: … 4xx" by itself: expected in the error paths tested.
    if (m.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) errors.push(`console: ${m.text()}`);
  });
  return errors;
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/** axe-core over the page as it is now; only serious and critical violations are returned. */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, which the page's CSP (script-src 'self') does not govern.
  if (!(await page.evaluate("typeof window.axe === 'object'"))) await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: object): Promise<{ violations: unknown[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations;
  })) as Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: string[] }> }>;
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")) }));
}

/** Screenshots of the page at desktop and phone width: `<name>-1280.png`, `<name>-375.png`. Restores the desktop width. */
export async function screenshots(page: Page, name: string): Promise<string[]> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const files: string[] = [];
  for (const size of [WIDTHS.phone, WIDTHS.desktop]) {
    await page.setViewportSize(size);
    const file = join(ARTIFACTS, `${name}-${size.width}.png`);
    await page.screenshot({ path: file, fullPage: true });
    files.push(file);
  }
  return files;
}

/** Whether the page at 375 px scrolls sideways (it must not: every page is readable at phone width). */
export async function overflowsAtPhoneWidth(page: Page): Promise<boolean> {
  await page.setViewportSize(WIDTHS.phone);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);
  await page.setViewportSize(WIDTHS.desktop);
  return overflow;
}

/** A fresh browser context (its own cookies and storage) at desktop width. */
export async function newContext(browser: Browser, baseURL: string): Promise<BrowserContext> {
  const context = await browser.newContext({ baseURL, viewport: WIDTHS.desktop });
  // Well under the test's timeout, so a missing element fails with its locator named.
  context.setDefaultTimeout(10_000);
  return context;
}

/**
 * A page signed in with `token` through the console's token form, in a new context pushed on
 * `contexts` (the test closes them), with the page's errors collected. By default the page opens
 * at `hash` and the sign-in page returns there; `signInFirst` signs in on `#/sign-in`, waits for
 * the projects list, then loads `hash` afresh. `clipboard` lets Copy buttons write and the test read.
 */
export async function signedInPage(
  browser: Browser,
  baseURL: string,
  contexts: BrowserContext[],
  token: string,
  hash: string,
  opts: { signInFirst?: boolean; clipboard?: boolean } = {},
): Promise<{ page: Page; errors: string[] }> {
  const context = await newContext(browser, baseURL);
  if (opts.clipboard) await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseURL });
  contexts.push(context);
  const page = await context.newPage();
  const errors = watchPageErrors(page);
  await page.goto(opts.signInFirst ? "/#/sign-in" : `/${hash}`);
  await page.getByLabel("Personal access token", { exact: true }).fill(token);
  await page.getByRole("button", { name: "Sign in with token" }).click();
  if (opts.signInFirst) {
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    await page.goto(`/${hash}`);
  }
  return { page, errors };
}

/** Screenshots at both widths, then axe (no serious or critical violation) and no sideways scrolling at 375 px. */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  await screenshots(page, name);
  expect(await seriousViolations(page), `axe on ${name}`).toEqual([]);
  expect(await overflowsAtPhoneWidth(page), `${name} scrolls sideways at 375 px`).toBe(false);
}

/** A bearer-token JSON call to the API at `baseUrl` (the tests' setup and checks): the parsed answer, or an error naming the status. */
export async function apiAs<T = any>(baseUrl: string, token: string, method: string, path: string, json?: unknown, expected = 200, org?: string): Promise<T> {
  const res = await fetch(`${baseUrl}/api${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(org ? { "x-organization-id": org } : {}),
      ...(json === undefined ? {} : { "content-type": "application/json" }),
    },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}
