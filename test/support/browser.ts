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
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { inject } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { type FreshDatabase, freshDatabase } from "./fresh-database";
import type { Harness } from "./harness";
import { type SmtpReceiver, startSmtpReceiver } from "./receivers";
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

/** startSelfHosted as `npm start` runs it (runner off: no app is deployed here), mail to a test SMTP receiver. */
export async function startConsoleServer(prefix: string, env: Record<string, string> = {}): Promise<ConsoleServer> {
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
      SMTP_URL: smtp.url,
      EMAIL_FROM: "Workspace <sign-in@workspace.test>",
      ...env,
    });
    server = await startSelfHosted(config, () => {});
    database = await openPostgres(db.url, { migrate: false, max: 2 });
    return { url: server.url, smtp, harness: { db: database.db } as Harness, close };
  } catch (e) {
    await close();
    throw e;
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
