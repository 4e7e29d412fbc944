/**
 * The self-hosted Node adapter as an operator meets it: first start on an empty
 * data dir, the owner token, the data-dir lock, restarts, Postgres mode, signals.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { DataDirLockedError } from "../../functions/self-hosted/data-dir";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";
import { freshDatabase } from "../support/fresh-database";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "ws-sh-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function start(env: Record<string, string>, lines: string[] = []): Promise<RunningServer> {
  const server = await startSelfHosted(loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", ...env }), (l) => lines.push(l));
  cleanups.push(() => server.close());
  return server;
}

const me = (url: string, token: string) => fetch(`${url}/api/me`, { headers: { authorization: `Bearer ${token}` } });

describe("self-hosted adapter on PGlite", () => {
  it("first start creates the owner, prints the token once and saves it 0600", async () => {
    const dir = tempDir();
    const lines: string[] = [];
    const server = await start({ DATA_DIR: dir }, lines);
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    expect(token).toMatch(/^wsp_[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(dir, "owner-token")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "secret-keys")).mode & 0o777).toBe(0o600);
    expect(lines.join("\n").split(token).length - 1).toBe(1);
    const res = await me(server.url, token);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.organizations).toHaveLength(1);
    expect(body.organizations[0].role).toBe("owner");
    expect(body.tags).toContain("org:admin");
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  }, 60_000);

  it("refuses a second process on the same data dir, and keeps data across restarts", async () => {
    const dir = tempDir();
    const first = await start({ DATA_DIR: dir });
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    const patch = await fetch(`${first.url}/api/settings/build-mode`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ buildMode: "local" }),
    });
    expect(patch.status).toBe(200);

    await expect(start({ DATA_DIR: dir })).rejects.toThrow(DataDirLockedError);
    await expect(start({ DATA_DIR: dir })).rejects.toThrow(/in use by another workspace-service process/);

    await first.close();
    const lines: string[] = [];
    const second = await start({ DATA_DIR: dir }, lines);
    expect(lines.join("\n")).not.toContain("First start");
    const settings = await fetch(`${second.url}/api/settings`, { headers: { authorization: `Bearer ${token}` } });
    expect((await settings.json()).buildMode).toBe("local");
  }, 60_000);

  it("uses WORKSPACE_OWNER_TOKEN as the owner token without printing it", async () => {
    const dir = tempDir();
    const chosen = `automation-${"x".repeat(40)}`;
    const lines: string[] = [];
    const server = await start({ DATA_DIR: dir, WORKSPACE_OWNER_TOKEN: chosen }, lines);
    expect((await me(server.url, chosen)).status).toBe(200);
    expect(lines.join("\n")).not.toContain(chosen);
  }, 60_000);

  it("rejects a short WORKSPACE_OWNER_TOKEN and a bad PORT at start", () => {
    expect(() => loadNodeConfig({ WORKSPACE_OWNER_TOKEN: "short" })).toThrow(/at least 32/);
    expect(() => loadNodeConfig({ PORT: "http" })).toThrow(/PORT/);
    expect(loadNodeConfig({})).toMatchObject({ port: 8787, host: "127.0.0.1", dataDir: "./data" });
  });
});

describe("self-hosted adapter on Postgres", () => {
  it.runIf(inject("pgKind") === "postgres")("bootstraps an empty database once and serves it", async () => {
    const own = await freshDatabase(inject("pgUrl"), "ws_sh");
    cleanups.push(() => own.drop());
    const url = new URL(own.url);
    const dir = tempDir();
    const server = await start({ DATA_DIR: dir, DATABASE_URL: url.toString() });
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    expect((await me(server.url, token)).status).toBe(200);
    // No data-dir lock with Postgres: several stateless processes may share it.
    const lines: string[] = [];
    const other = await start({ DATA_DIR: dir, DATABASE_URL: url.toString() }, lines);
    expect(lines.join("\n")).not.toContain("First start");
    expect((await me(other.url, token)).status).toBe(200);
  }, 60_000);
});

describe("npm start process", () => {
  function launch(dir: string): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    let out = "";
    const child = spawn(process.execPath, ["--import", "tsx", "functions/node.ts"], {
      env: { ...process.env, DATA_DIR: dir, PORT: "0", LOG_LEVEL: "silent", DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    cleanups.push(() => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });
    return { child, output: () => out, exited };
  }

  async function waitFor(check: () => boolean, what: string, ms = 30_000) {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("stops a second process with a clear message and shuts down cleanly on SIGTERM", async () => {
    const dir = tempDir();
    const first = launch(dir);
    await waitFor(() => first.output().includes("listening on"), "the first process to listen");

    const second = launch(dir);
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(/is in use by another workspace-service process \(pid \d+\)/);

    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    expect(existsSync(join(dir, ".lock"))).toBe(false);
  }, 60_000);
});
