/**
 * What the self-hosted server prints on its terminal, as `npm start` runs it (a process,
 * its stdout read): no line per request by default (the console polls every few seconds),
 * one JSON line per request with LOG_REQUESTS=true or LOG_LEVEL=debug, none with
 * LOG_REQUESTS=false whatever the level. The deployment state-change lines are checked on
 * a real deployment in test/node/runner/crash.test.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type FreshDatabase, freshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const running: ChildProcess[] = [];
const dirs: string[] = [];
// Postgres, migrated up front: the embedded database's first start costs a minute on a busy machine.
let db: FreshDatabase;

beforeAll(async () => {
  db = await freshDatabase(inject("pgUrl"), "terminal", { migrate: true });
}, 60_000);

afterAll(async () => {
  await db?.drop();
});

afterEach(() => {
  for (const child of running.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** `npm start` with `env` over a fresh DATA_DIR, the suite's database and no runner; resolves once it listens. */
async function start(env: Record<string, string>): Promise<{ url: string; output: () => string; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "terminal-"));
  dirs.push(dir);
  let out = "";
  const child = spawn(process.execPath, ["functions/start.mjs"], {
    env: {
      ...process.env,
      DATA_DIR: join(dir, "data"),
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: db.url,
      SECRET_KEYS: TEST_SECRET_KEYS,
      RUNNER: "off",
      LOG_LEVEL: "",
      LOG_REQUESTS: "",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.push(child);
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const deadline = Date.now() + 150_000;
  for (;;) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) {
      return {
        url: m[1]!,
        output: () => out,
        stop: async () => {
          child.kill("SIGTERM");
          await exited;
        },
      };
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the server did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A few requests a browser on the console makes: the page, a script, the signed-out /api/me, a poll. */
async function browse(url: string) {
  for (const path of ["/", "/app.js", "/api/me", "/api/me", "/healthz"]) await (await fetch(`${url}${path}`)).text();
}

const requestLines = (out: string) =>
  out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { msg: string; path?: string; status?: number })
    .filter((l) => l.msg === "request");

describe("the server's terminal", () => {
  it("prints no line per request by default, and one per request with LOG_REQUESTS=true", { timeout: 360_000 }, async () => {
    const quiet = await start({});
    await browse(quiet.url);
    await quiet.stop();
    expect(quiet.output()).toContain("listening on");
    expect(requestLines(quiet.output())).toEqual([]);
    expect(quiet.output()).not.toContain('"msg":"request"');

    const loud = await start({ LOG_REQUESTS: "true" });
    await browse(loud.url);
    await loud.stop();
    const lines = requestLines(loud.output());
    expect(lines.filter((l) => l.path === "/api/me").map((l) => l.status)).toEqual([401, 401]);
    expect(lines.some((l) => l.path === "/")).toBe(true);
    // The probe's successes stay quiet even then: a load balancer polls it every second.
    expect(lines.some((l) => l.path === "/healthz")).toBe(false);
  });

  it("turns request lines on with LOG_LEVEL=debug unless LOG_REQUESTS=false; refuses other values", () => {
    const base = { DATA_DIR: "./data" };
    expect(loadNodeConfig(base)).toMatchObject({ logLevel: "info", logRequests: false });
    expect(loadNodeConfig({ ...base, LOG_REQUESTS: "true" }).logRequests).toBe(true);
    expect(loadNodeConfig({ ...base, LOG_REQUESTS: "1" }).logRequests).toBe(true);
    expect(loadNodeConfig({ ...base, LOG_LEVEL: "debug" })).toMatchObject({ logLevel: "debug", logRequests: true });
    expect(loadNodeConfig({ ...base, LOG_LEVEL: "debug", LOG_REQUESTS: "false" }).logRequests).toBe(false);
    expect(() => loadNodeConfig({ ...base, LOG_REQUESTS: "yes" })).toThrow("Invalid configuration LOG_REQUESTS: LOG_REQUESTS must be true or false");
    expect(() => loadNodeConfig({ ...base, LOG_LEVEL: "verbose" })).toThrow("Invalid configuration LOG_LEVEL: LOG_LEVEL must be debug, info or silent");
  });
});
