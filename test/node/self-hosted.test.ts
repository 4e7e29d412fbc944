/**
 * The self-hosted Node adapter as an operator meets it: first start on an empty
 * data dir, the owner token, the data-dir lock, restarts, Postgres mode, signals.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, copyFileSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, existsSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { DataDirLockedError, DataDirPermissionsError } from "../../functions/self-hosted/data-dir";
import { PortInUseError } from "../../functions/self-hosted/http-server";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";
import { DEFAULT_S3_REGION } from "../../shared/storage/s3";
import { expectStatus, seedTenant, useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { startHttpReceiver } from "../support/receivers";
import { freshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";
import pg from "pg";
import { useCleanups } from "../support/cleanups";

const { cleanups, tempDir } = useCleanups("ws-sh-");

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
    expect(loadNodeConfig({})).toMatchObject({ port: 8787, host: "127.0.0.1", dataDir: join(process.cwd(), "data") });
  });
});

describe("self-hosted adapter on Postgres", () => {
  it.runIf(inject("pgKind") === "postgres")(
    "bootstraps an empty database once and serves it",
    async () => {
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
    },
    60_000,
  );

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

  postgres(
    "with SECRET_KEYS and a DATA_DIR that does not exist yet, first start creates it and saves the token",
    async () => {
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
    },
    60_000,
  );

  postgres(
    "a first start that cannot save the owner token creates nothing; the next one completes",
    async () => {
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
    },
    60_000,
  );

  postgres(
    "with WORKSPACE_OWNER_TOKEN, writes no owner-token (and needs no DATA_DIR)",
    async () => {
      const own = await freshDatabase(inject("pgUrl"), "ws_sh");
      cleanups.push(() => own.drop());
      const dir = join(tempDir(), "absent");
      const chosen = `automation-${"y".repeat(40)}`;
      const server = await start({ DATA_DIR: dir, DATABASE_URL: own.url, SECRET_KEYS: TEST_SECRET_KEYS, WORKSPACE_OWNER_TOKEN: chosen });
      expect((await me(server.url, chosen)).status).toBe(200);
      expect(existsSync(dir)).toBe(false);
    },
    60_000,
  );
});

describe("npm start process", () => {
  function launch(dir: string, env: Record<string, string> = {}): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    let out = "";
    // What `npm start` runs: the launcher, serving the compiled bundle (built first if stale).
    const child = spawn(process.execPath, ["functions/start.mjs"], {
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

  it("prints how long start-up took on the start line", async () => {
    const run = launch(tempDir());
    await waitFor(() => run.output().includes("listening on"), "the server to listen");
    expect(run.output()).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+ \(ready in \d+\.\d s\)/);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  }, 60_000);

  /** The pids of `pid`'s children. */
  const childrenOf = (pid: number) =>
    spawnSync("ps", ["-o", "pid=", "--ppid", String(pid)], { encoding: "utf8" })
      .stdout.split("\n")
      .map((l) => Number(l.trim()))
      .filter((n) => n > 0);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  /** `npm start` in a process group of its own; resolves once it serves, with npm's pid and the pid npm started. */
  async function npmStart(dir: string) {
    let out = "";
    const npm = spawn("npm", ["start"], {
      env: { ...process.env, DATA_DIR: dir, PORT: "0", LOG_LEVEL: "silent", DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    npm.stdout!.on("data", (d) => (out += d));
    npm.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<void>((resolve) => npm.once("exit", () => resolve()));
    cleanups.push(() => {
      try {
        process.kill(-npm.pid!, "SIGKILL");
      } catch {
        // Nothing left.
      }
    });
    await waitFor(() => out.includes("listening on"), "npm start to listen");
    const url = /listening on (http:\/\/\S+)/.exec(out)![1]!;
    const [server, ...more] = childrenOf(npm.pid!);
    expect(more).toEqual([]);
    return { npm, server: server!, url, exited, output: () => out };
  }

  async function expectStoppedCleanly(run: Awaited<ReturnType<typeof npmStart>>, dir: string) {
    await run.exited;
    await waitFor(() => !alive(run.server), "the server process to exit", 15_000);
    await expect(fetch(`${run.url}/api/me`)).rejects.toThrow();
    expect(existsSync(join(dir, ".lock"))).toBe(false);
    expect(run.output()).toContain("SIGTERM: shutting down");
    // Nothing of the group is left (npm, a shell, a loader, the server).
    expect(() => process.kill(-run.npm.pid!, 0)).toThrow();
  }

  it("npm start runs the server as the process npm starts, and SIGTERM to it stops everything and releases the lock", async () => {
    const dir = tempDir();
    const run = await npmStart(dir);
    // No shell or loader in between: the process npm started is the server itself.
    const cmdline = readFileSync(`/proc/${run.server}/cmdline`, "utf8").split("\0");
    expect(cmdline.slice(1, 2)).toEqual(["functions/start.mjs"]);
    expect(childrenOf(run.server)).toEqual([]);
    process.kill(run.server, "SIGTERM");
    await expectStoppedCleanly(run, dir);
  }, 90_000);

  it("SIGTERM to npm itself stops the server too and releases the lock", async () => {
    const dir = tempDir();
    const run = await npmStart(dir);
    process.kill(run.npm.pid!, "SIGTERM");
    await expectStoppedCleanly(run, dir);
  }, 90_000);

  it("does not load the AWS SDK or nodemailer at start, even with S3 and SMTP configured", async () => {
    const dir = tempDir();
    const log = join(dir, "loaded");
    const hook = join(dir, "hook.mjs");
    writeFileSync(
      hook,
      `import { registerHooks } from "node:module"; import { appendFileSync } from "node:fs";
registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); appendFileSync(${JSON.stringify(log)}, r.url + "\\n"); return r; } });`,
    );
    let out = "";
    const child = spawn(process.execPath, ["--import", hook, "functions/start.mjs"], {
      env: {
        ...process.env,
        DATA_DIR: join(dir, "data"),
        PORT: "0",
        LOG_LEVEL: "silent",
        DATABASE_URL: "",
        SMTP_URL: "smtp://127.0.0.1:1",
        S3_ENDPOINT: "http://127.0.0.1:1",
        S3_BUCKET: "b",
        S3_ACCESS_KEY_ID: "k",
        S3_SECRET_ACCESS_KEY: "s",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    cleanups.push(() => void (child.exitCode === null && child.kill("SIGKILL")));
    await waitFor(() => out.includes("listening on"), "the server to listen");
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    const loaded = readFileSync(log, "utf8");
    expect(loaded).toContain("/dist/node/server.mjs");
    expect(loaded).toContain("@electric-sql/pglite");
    expect(loaded).not.toMatch(/@aws-sdk|nodemailer/);
  }, 60_000);
});

describe("the npm start launcher", () => {
  /** A project of its own: the launcher (with its build options), an entry that prints what shared/ holds, and the repository's node_modules. */
  function project() {
    const root = tempDir();
    mkdirSync(join(root, "functions"));
    mkdirSync(join(root, "shared"));
    copyFileSync("functions/start.mjs", join(root, "functions", "start.mjs"));
    copyFileSync("functions/node-bundle.mjs", join(root, "functions", "node-bundle.mjs"));
    writeFileSync(join(root, "functions", "node.ts"), `import { version } from "../shared/version";\nconsole.log("running " + version);\n`);
    writeFileSync(join(root, "package.json"), JSON.stringify({ type: "module" }));
    symlinkSync(join(process.cwd(), "node_modules"), join(root, "node_modules"));
    const version = (v: string) => writeFileSync(join(root, "shared", "version.ts"), `export const version: string = "${v}";\n`);
    const run = () => {
      const r = spawnSync(process.execPath, [join(root, "functions", "start.mjs")], { encoding: "utf8" });
      expect(r.stderr).toBe("");
      return r.stdout.trim();
    };
    const bundleTime = () => statSync(join(root, "dist", "node", "server.mjs")).mtimeMs;
    return { root, version, run, bundleTime };
  }

  it("builds on first start, reuses the build while nothing changed, and rebuilds after any change", async () => {
    const p = project();
    p.version("one");
    expect(p.run()).toBe("running one");
    const built = p.bundleTime();
    expect(p.run()).toBe("running one");
    expect(p.bundleTime()).toBe(built);
    // Same length, same second: only the content differs.
    p.version("two");
    expect(p.run()).toBe("running two");
    const rebuilt = p.bundleTime();
    // Written again with the same content (a checkout, a touch): the quick stamp differs, the content decides: no rebuild.
    p.version("two");
    expect(p.run()).toBe("running two");
    expect(p.bundleTime()).toBe(rebuilt);
    // A new file is an input too.
    writeFileSync(join(p.root, "shared", "extra.ts"), "export {};\n");
    expect(p.run()).toBe("running two");
    expect(p.bundleTime()).not.toBe(rebuilt);
  }, 60_000);

  it("as npm's postinstall (--build-only --template) builds and exits 0, also where the checkout has no template maker", () => {
    const p = project();
    p.version("one");
    const r = spawnSync(process.execPath, [join(p.root, "functions", "start.mjs"), "--build-only", "--template"], { encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(r.stdout).not.toContain("running");
    expect(existsSync(join(p.root, "dist", "node", "server.mjs"))).toBe(true);
  }, 60_000);
});

describe("the test harness", () => {
  const h = useHarness(pgliteHarness);

  it("runs the services npm start builds: the guarded outbound client, private networks allowed as configured", async () => {
    const t = await seedTenant(h);
    const receiver = await startHttpReceiver();
    cleanups.push(() => receiver.close());
    const send = (method: string, path: string, json?: unknown) => h.request(`/api/notifications${path}`, { method, token: t.token, json });
    const local = await expectStatus(await send("POST", "/channels", { kind: "webhook", label: "local", config: { url: `${receiver.origin}/hook` } }), 201);
    expect(await expectStatus(await send("POST", `/channels/${local.id}/test`), 200)).toMatchObject({ delivered: true, statusCode: 200 });
    expect(receiver.recorder.hits).toHaveLength(1);
    // Metadata addresses stay refused whatever OUTBOUND_ALLOW_PRIVATE says.
    const metadata = await expectStatus(
      await send("POST", "/channels", { kind: "webhook", label: "meta", config: { url: "http://169.254.169.254/hook" } }),
      201,
    );
    const refused = await expectStatus(await send("POST", `/channels/${metadata.id}/test`), 200);
    expect(refused).toMatchObject({ delivered: false, statusCode: null });
  });

  it("wakes the delivery engine when an event queues sends, as npm start does", async () => {
    const t = await seedTenant(h);
    const receiver = await startHttpReceiver();
    cleanups.push(() => receiver.close());
    const send = (method: string, path: string, json?: unknown) => h.request(`/api/notifications${path}`, { method, token: t.token, json });
    const c = await expectStatus(await send("POST", "/channels", { kind: "webhook", label: "hook", config: { url: `${receiver.origin}/hook` } }), 201);
    await expectStatus(await send("PATCH", `/channels/${c.id}`, { verified: true }), 200);
    await expectStatus(await send("PUT", "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true }), 200);
    await expectStatus(await send("POST", "/events", { category: "deploy.failed", title: "Deploy failed", message: "exit 1" }), 202);
    // No drain from the test: the running engine delivers it.
    const deadline = Date.now() + 10_000;
    while (receiver.recorder.hits.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    expect(receiver.recorder.hits).toHaveLength(1);
  });
});

describe("S3_REGION", () => {
  it("defaults to the one region both runtimes share", () => {
    const s3 = { S3_ENDPOINT: "http://127.0.0.1:9000", S3_BUCKET: "b", S3_ACCESS_KEY_ID: "k", S3_SECRET_ACCESS_KEY: "s" };
    expect(DEFAULT_S3_REGION).toBe("us-east-1");
    expect(loadNodeConfig(s3).s3?.region).toBe(DEFAULT_S3_REGION);
    expect(loadNodeConfig({ ...s3, S3_REGION: "auto" }).s3?.region).toBe("auto");
  });
});
