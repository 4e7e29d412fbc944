/**
 * The self-hosted Node adapter as an operator meets it: first start on an empty
 * data dir, the owner token, the data-dir lock, restarts, Postgres mode, signals.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { DataDirLockedError, DataDirPermissionsError } from "../../functions/self-hosted/data-dir";
import { PortInUseError } from "../../functions/self-hosted/http-server";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";
import { freshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";
import pg from "pg";

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

/** Every path under `dir` whose mode is not 0700 (folders) or 0600 (files). */
function notPrivate(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((e) => join(e.parentPath, e.name))
    .filter((path) => {
      const info = lstatSync(path);
      return !info.isSymbolicLink() && (info.mode & 0o777) !== (info.isDirectory() ? 0o700 : 0o600);
    })
    .map((path) => `${path.slice(dir.length)} ${(lstatSync(path).mode & 0o777).toString(8)}`);
}

/** A port some other server holds. */
async function takenPort(): Promise<number> {
  const holder: Server = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  return (holder.address() as { port: number }).port;
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
    // The operator chose it: it is not copied to disk.
    expect(existsSync(join(dir, "owner-token"))).toBe(false);
  }, 60_000);

  it("creates everything under DATA_DIR private whatever the umask, after start and after stop", async () => {
    const dir = tempDir();
    chmodSync(dir, 0o755); // readable by others, as many existing folders are
    const umask = process.umask(0);
    try {
      const server = await start({ DATA_DIR: dir });
      expect(notPrivate(dir)).toEqual([]);
      await server.close();
    } finally {
      process.umask(umask);
    }
    expect(notPrivate(dir)).toEqual([]);
  }, 60_000);

  it("refuses a group- or world-writable DATA_DIR, creating nothing in it", async () => {
    for (const mode of [0o777, 0o775, 0o770]) {
      const dir = tempDir();
      chmodSync(dir, mode);
      const started = start({ DATA_DIR: dir });
      await expect(started).rejects.toThrow(DataDirPermissionsError);
      await expect(started).rejects.toThrow(`chmod 700 ${dir}`);
      expect(readdirSync(dir)).toEqual([]);
    }
  });

  it("reports a taken port before creating anything", async () => {
    const port = await takenPort();
    const dir = join(tempDir(), "data");
    const lines: string[] = [];
    const started = startSelfHosted(loadNodeConfig({ PORT: String(port), LOG_LEVEL: "silent", DATA_DIR: dir }), (l) => lines.push(l));
    await expect(started).rejects.toThrow(PortInUseError);
    await expect(started).rejects.toThrow(`Port ${port} is already in use (127.0.0.1:${port}); set PORT to a free port`);
    expect(existsSync(dir)).toBe(false);
    expect(lines).toEqual([]);
  });

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

  const postgres = it.runIf(inject("pgKind") === "postgres");
  const users = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query("select count(*)::int as n from users")).rows[0].n as number;
    } finally {
      await client.end();
    }
  };

  postgres("with SECRET_KEYS and a DATA_DIR that does not exist yet, first start creates it and saves the token", async () => {
    const own = await freshDatabase(inject("pgUrl"), "ws_sh");
    cleanups.push(() => own.drop());
    const dir = join(tempDir(), "new", "data");
    const lines: string[] = [];
    const server = await start({ DATA_DIR: dir, DATABASE_URL: own.url, SECRET_KEYS: TEST_SECRET_KEYS }, lines);
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    expect(lines.join("\n")).toContain(token);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "owner-token")).mode & 0o777).toBe(0o600);
    expect((await me(server.url, token)).status).toBe(200);
  }, 60_000);

  postgres("a first start that cannot save the owner token creates nothing; the next one completes", async () => {
    const own = await freshDatabase(inject("pgUrl"), "ws_sh");
    cleanups.push(() => own.drop());
    const dir = tempDir();
    chmodSync(dir, 0o700);
    mkdirSync(join(dir, "owner-token")); // in the way (permissions do not stop root; a folder does)
    const lines: string[] = [];
    await expect(start({ DATA_DIR: dir, DATABASE_URL: own.url, SECRET_KEYS: TEST_SECRET_KEYS }, lines)).rejects.toThrow(/owner-token/);
    expect(await users(own.url)).toBe(0);
    expect(lines).toEqual([]);
    expect(readdirSync(dir)).toEqual(["owner-token"]); // no temporary file left

    rmSync(join(dir, "owner-token"), { recursive: true });
    const server = await start({ DATA_DIR: dir, DATABASE_URL: own.url, SECRET_KEYS: TEST_SECRET_KEYS }, lines);
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    expect((await me(server.url, token)).status).toBe(200);
    expect(await users(own.url)).toBe(1);
  }, 60_000);

  postgres("with WORKSPACE_OWNER_TOKEN, writes no owner-token (and needs no DATA_DIR)", async () => {
    const own = await freshDatabase(inject("pgUrl"), "ws_sh");
    cleanups.push(() => own.drop());
    const dir = join(tempDir(), "absent");
    const chosen = `automation-${"y".repeat(40)}`;
    const server = await start({ DATA_DIR: dir, DATABASE_URL: own.url, SECRET_KEYS: TEST_SECRET_KEYS, WORKSPACE_OWNER_TOKEN: chosen });
    expect((await me(server.url, chosen)).status).toBe(200);
    expect(existsSync(dir)).toBe(false);
  }, 60_000);
});

describe("npm start process", () => {
  function launch(dir: string, env: Record<string, string> = {}): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    let out = "";
    const child = spawn(process.execPath, ["--import", "tsx", "functions/node.ts"], {
      env: { ...process.env, DATA_DIR: dir, PORT: "0", LOG_LEVEL: "silent", DATABASE_URL: "", ...env },
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

  it("exits with a clear message on a taken port, having created nothing", async () => {
    const port = await takenPort();
    const dir = join(tempDir(), "data");
    const run = launch(dir, { PORT: String(port) });
    expect(await run.exited).toBe(1);
    expect(run.output()).toContain(`Port ${port} is already in use (127.0.0.1:${port}); set PORT to a free port, or stop the process using it.`);
    expect(run.output()).not.toMatch(/EADDRINUSE|First start|wsp_/);
    expect(existsSync(dir)).toBe(false);
  }, 60_000);
});
