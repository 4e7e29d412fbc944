/**
 * `npm run bench:console`: the web console's first page load in Debian's Chromium
 * (playwright-core, `/usr/bin/chromium` or CHROMIUM_PATH), on the self-hosted server
 * as `npm start` runs it (embedded database, a fresh data directory), signed in, with
 * BENCH_PROJECTS (default 20) projects in the organization.
 *
 * Per round (BENCH_ROUNDS, default 5):
 * - cold: a new browser context (empty HTTP cache) opening `/#/projects`;
 * - warm: the same page reloaded (revalidated by ETag);
 * measured by Chromium's navigation timing: `domInteractive`, and the console's own
 * `rendered projects` mark (the list on screen: GET /api/me and /api/projects/home
 * answered), with the bytes transferred for the page and everything it loaded.
 * The floor, in the same run: a bare Node HTTP server's page with one same-origin
 * script that sets the same mark at once (the browser and loopback alone).
 * Medians are printed with their ratio to the floor; the targets (issue 14: under 1 s
 * cold on loopback, under 300 KB for the projects page) are printed as met or not.
 *
 * Exit code 0 whatever the figures (it is a measurement); non-zero on errors.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { loadNodeConfig } from "../functions/self-hosted/config";
import { startSelfHosted } from "../functions/self-hosted/start";
import { intEnv, report } from "./common";

const ROUNDS = intEnv("BENCH_ROUNDS", 5, 1, 50);
const PROJECTS = intEnv("BENCH_PROJECTS", 20, 0, 500);
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];
const OWNER_TOKEN = `wsp_bench_${"c".repeat(40)}`;

interface Figures {
  domInteractiveMs: number;
  shownMs: number;
  transferredBytes: number;
  requests: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(page: Page, mark: string): Promise<Figures> {
  await page.waitForFunction((name) => performance.getEntriesByName(name).length > 0, mark);
  return page.evaluate((name) => {
    const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
    const resources = performance.getEntriesByType("resource") as PerformanceResourceTiming[];
    return {
      domInteractiveMs: Math.round(nav.domInteractive),
      shownMs: Math.round(performance.getEntriesByName(name)[0]!.startTime),
      transferredBytes: nav.transferSize + resources.reduce((n, r) => n + r.transferSize, 0),
      requests: resources.length + 1,
    };
  }, mark);
}

/** Cold (new context) then warm (reload) loads of `url`, ROUNDS times. */
async function rounds(browser: Browser, url: string, mark: string, cookies: Array<{ name: string; value: string; url: string }>) {
  const cold: Figures[] = [];
  const warm: Figures[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const context = await browser.newContext();
    if (cookies.length) await context.addCookies(cookies);
    const page = await context.newPage();
    await page.goto(url);
    cold.push(await measure(page, mark));
    await page.reload();
    warm.push(await measure(page, mark));
    await context.close();
  }
  const summary = (xs: Figures[]) => ({
    domInteractiveMs: median(xs.map((f) => f.domInteractiveMs)),
    shownMs: median(xs.map((f) => f.shownMs)),
    transferredBytes: median(xs.map((f) => f.transferredBytes)),
    requests: median(xs.map((f) => f.requests)),
  });
  return { cold: summary(cold), warm: summary(warm) };
}

/** The floor: a page and one same-origin script that marks at once, from a bare Node server. */
async function floorServer(): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url === "/mark.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end('performance.mark("rendered projects");');
      return;
    }
    res.writeHead(200, { "content-type": "text/html" });
    res.end('<!doctype html><html lang="en"><title>floor</title><script type="module" src="/mark.js"></script><h1>floor</h1>');
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return server;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-console-"));
  const config = loadNodeConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "silent",
    RUNNER: "off",
    WORKSPACE_OWNER_TOKEN: OWNER_TOKEN,
  });
  const server = await startSelfHosted(config, () => {});
  const floor = await floorServer();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  try {
    const auth = { authorization: `Bearer ${OWNER_TOKEN}`, "content-type": "application/json" };
    for (let i = 0; i < PROJECTS; i++) {
      const res = await fetch(`${server.url}/api/projects`, { method: "POST", headers: auth, body: JSON.stringify({ name: `bench ${i}` }) });
      if (res.status !== 201) throw new Error(`creating a project answered ${res.status}`);
    }
    // Sign in as the console does with a pasted token: the session cookie.
    const signIn = await fetch(`${server.url}/api/auth/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: OWNER_TOKEN }),
    });
    const cookie = signIn.headers.get("set-cookie")?.split(";")[0];
    if (signIn.status !== 200 || !cookie) throw new Error(`token sign-in answered ${signIn.status}`);
    const [name, value] = [cookie.slice(0, cookie.indexOf("=")), cookie.slice(cookie.indexOf("=") + 1)];

    const floorUrl = `http://127.0.0.1:${(floor.address() as AddressInfo).port}/`;
    const bare = await rounds(browser, floorUrl, "rendered projects", []);
    const consoleFigures = await rounds(browser, `${server.url}/#/projects`, "rendered projects", [{ name, value, url: server.url }]);

    const row = (label: string, f: Figures, base: Figures) =>
      `${label.padEnd(22)} interactive ${String(f.domInteractiveMs).padStart(5)} ms   on screen ${String(f.shownMs).padStart(5)} ms (${(f.shownMs / Math.max(1, base.shownMs)).toFixed(1)}x floor)   ${(f.transferredBytes / 1024).toFixed(1).padStart(6)} KB in ${f.requests} requests`;
    console.log(`console load, ${ROUNDS} rounds, ${PROJECTS} projects, medians:`);
    console.log(row("floor, cold", bare.cold, bare.cold));
    console.log(row("floor, warm", bare.warm, bare.warm));
    console.log(row("projects page, cold", consoleFigures.cold, bare.cold));
    console.log(row("projects page, warm", consoleFigures.warm, bare.warm));
    const met = (ok: boolean) => (ok ? "met" : "NOT met");
    report({
      measure: "console projects page, cold, on screen",
      figure: `${consoleFigures.cold.shownMs} ms`,
      floor: `${bare.cold.shownMs} ms (a bare page)`,
      ratio: consoleFigures.cold.shownMs / Math.max(1, bare.cold.shownMs),
      target: "< 1000 ms, < 300 KB",
      met: consoleFigures.cold.shownMs < 1000 && consoleFigures.cold.transferredBytes < 300 * 1024,
    });
    console.log(
      `targets: cold on screen < 1000 ms: ${met(consoleFigures.cold.shownMs < 1000)}; projects page < 300 KB: ${met(consoleFigures.cold.transferredBytes < 300 * 1024)}`,
    );
  } finally {
    await browser.close();
    await new Promise<void>((r) => floor.close(() => r()));
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
