/**
 * Apps survive the server's death as a user expects, with the real server
 * process (`node functions/start.mjs`, as `npm start` runs it) on Postgres and
 * on its embedded database, the runner on, with its sandbox and with
 * RUNNER_SANDBOX=off: after `kill -9` of the server with three apps
 * running, nothing of them is left running unsupervised (a sandbox dies
 * with its parent; unconfined, what a previous run left in its cgroups is ended at start),
 * and the restart runs each app exactly once. An app whose port another
 * process took while the server was down comes back on a new port, and the
 * edge serves it there.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FreshDatabase, freshDatabase } from "../../support/fresh-database";
import { type GitTestServer, startGitServer } from "../../support/git-server";
import { pushApp } from "../../support/runner-harness";
import { TEST_SECRET_KEYS } from "../../support/test-keys";

const TOKEN = "survive-restart-owner-token-0123456789abcdef012";
const SHARED = "apps.test";
const PG = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

interface Server {
  child: ChildProcess;
  url: string;
  port: number;
  exited: Promise<void>;
}

const MODES = (["postgres", "pglite"] as const).flatMap((database) => (["on", "off"] as const).map((sandbox) => ({ database, sandbox })));

for (const { database, sandbox } of MODES) {
  /** Marks this suite's apps (an environment variable named after it) among every test's fixture apps on the machine. */
  const suite = `${database}_${sandbox}`.toUpperCase();
  let db: FreshDatabase | undefined;
  let git: GitTestServer;
  let dataDir: string;
  let server: Server | undefined;
  /** Listeners standing in for another process on an app's port. */
  const holders: Array<ReturnType<typeof createServer>> = [];

  /** `npm start`'s process on the suite's database and data directory; resolves once it listens. */
  async function startServer(): Promise<Server> {
    const child = spawn(process.execPath, ["functions/start.mjs"], {
      env: {
        ...process.env,
        DATA_DIR: dataDir,
        PORT: "0",
        HOST: "127.0.0.1",
        // Empty: the embedded database in DATA_DIR.
        DATABASE_URL: db?.url ?? "",
        SECRET_KEYS: TEST_SECRET_KEYS,
        WORKSPACE_OWNER_TOKEN: TOKEN,
        SHARED_DOMAIN: SHARED,
        OUTBOUND_ALLOW_PRIVATE: "true",
        GIT_GITEA_URL: git.url,
        RUNNER: "on",
        RUNNER_SANDBOX: sandbox,
        STOP_GRACE: "1s",
        HEALTH_TIMEOUT: "20s",
        SMOKE_WINDOW: "1s",
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const m = /listening on (http:\/\/127\.0\.0\.1:(\d+))/.exec(out);
      if (m) return { child, url: m[1]!, port: Number(m[2]), exited };
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the server did not start:\n${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function api<T>(path: string, json?: unknown, expected = json ? 201 : 200, method = json ? "POST" : "GET"): Promise<T> {
    const res = await fetch(`${server!.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(json ? { "content-type": "application/json" } : {}) },
      body: json ? JSON.stringify(json) : undefined,
    });
    const text = await res.text();
    if (res.status !== expected && !(json && res.status === 200)) throw new Error(`${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  /** GET through the edge with the app's Host. */
  function viaEdge(host: string, path = "/"): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port: server!.port, path, headers: { host } }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      // A held request (the app is starting) must not outlast the caller's own deadline.
      req.setTimeout(10_000, () => req.destroy(new Error("no answer within 10 s")));
      req.end();
    });
  }

  async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, ms = 60_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await read().catch(() => undefined);
      if (v !== undefined && ok(v)) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(v)})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  interface App {
    projectId: string;
    host: string;
  }

  /** The fixture app's `node server.js` processes on the whole machine, with the project they run for (their SURVIVOR variable). */
  function appProcesses(): Array<{ pid: number; projectId: string }> {
    const found: Array<{ pid: number; projectId: string }> = [];
    for (const name of readdirSync("/proc")) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const argv = readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0");
        if (!(argv[0]?.endsWith("node") && argv[1] === "server.js")) continue;
        const mark = readFileSync(`/proc/${name}/environ`, "latin1")
          .split("\0")
          .find((v) => v.startsWith(`SURVIVOR_${suite}=`));
        if (mark) found.push({ pid: Number(name), projectId: mark.slice(mark.indexOf("=") + 1) });
      } catch {
        // exited while we looked
      }
    }
    return found;
  }

  /** The port the app says it listens on (its PORT), asked through the edge (its first JSON answer within 10 s: a busy machine may still be switching). */
  async function appPort(host: string): Promise<number> {
    const answer = await until(
      `${host} answering`,
      () => viaEdge(host),
      (a) => a.status === 200 && a.body.startsWith("{"),
      10_000,
    );
    return Number(JSON.parse(answer.body).env.PORT);
  }

  const alive = (pid: number) => {
    try {
      readlinkSync(`/proc/${pid}/exe`);
      return true;
    } catch {
      return false;
    }
  };

  beforeAll(async () => {
    if (database === "postgres") db = await freshDatabase(PG, "survive_restart", { migrate: true });
    git = await startGitServer();
    dataDir = mkdtempSync(join(tmpdir(), "survive-restart-"));
    server = await startServer();
  }, 90_000);

  afterAll(async () => {
    if (server?.child.exitCode === null) {
      server.child.kill("SIGTERM");
      await server.exited;
    }
    for (const h of holders) h.close();
    await git?.close();
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  describe(`apps across a kill -9 of the server (${database}, RUNNER_SANDBOX=${sandbox})`, () => {
    const what =
      sandbox === "on"
        ? "die with the server, run exactly once after the restart, and one whose port was taken comes back on a new port behind the edge"
        : "are ended by the next start and run exactly once after it";
    it(what, async () => {
      const apps: App[] = [];
      for (const i of [1, 2, 3]) {
        const repo = await git.createRepo();
        await pushApp(git, repo.owner, repo.repo);
        const project = await api<{ id: string; routes: { free: { hostname: string } } }>("/api/projects", { name: `survivor ${i}` });
        await api(`/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
        await api(`/api/projects/${project.id}/env`, { upserts: [{ key: `SURVIVOR_${suite}`, value: project.id }] }, 200, "PATCH");
        const d = await api<{ id: string }>("/api/deployments", { projectId: project.id });
        await until(
          `deployment ${i} ready`,
          () => api<{ status: string; failureReason: string | null }>(`/api/deployments/${d.id}`),
          (v) => v.status === "ready" || v.status === "failed",
        ).then((v) => expect(v).toMatchObject({ status: "ready" }));
        apps.push({ projectId: project.id, host: project.routes.free.hostname });
      }
      for (const app of apps) expect((await viaEdge(app.host)).status).toBe(200);
      const before = appProcesses();
      expect(before.map((p) => p.projectId).sort()).toEqual(apps.map((a) => a.projectId).sort());
      const takenPort = await appPort(apps[0]!.host);

      // kill -9: nothing of the server runs its shutdown.
      server!.child.kill("SIGKILL");
      await server!.exited;
      if (sandbox === "on") {
        // The sandboxes die with their parent.
        await until(
          "the apps to end with the server",
          async () => before.filter((p) => alive(p.pid)),
          (left) => left.length === 0,
          10_000,
        );
        // Another process takes the first app's port while the server is down.
        const holder = createServer((_req, res) => res.end("not the app"));
        holders.push(holder);
        // A process of another test may have taken it first (ports are reused): then that one stands in for ours.
        await new Promise<void>((resolve) => holder.once("error", () => resolve()).listen(takenPort, "127.0.0.1", () => resolve()));
      }
      // Unconfined, the apps run on until the next start ends what its cgroups hold (README, Runner: Restarts).

      server = await startServer();
      // Until each app answers through the edge: meanwhile the edge holds or refuses requests, it never sends one to the old port.
      const seen: string[] = [];
      for (const app of apps) {
        await until(
          `${app.host} through the edge`,
          async () => {
            const a = await viaEdge(app.host);
            seen.push(a.body);
            return a;
          },
          (a) => a.status === 200 && a.body.startsWith("{"),
          60_000,
        );
      }
      expect(seen).not.toContain("not the app");
      const after = appProcesses();
      // Each app exactly once, none of the old processes (unconfined: the restart ended them, they were in its cgroups).
      expect(after.map((p) => p.projectId).sort()).toEqual(apps.map((a) => a.projectId).sort());
      for (const p of before) expect(after.some((q) => q.pid === p.pid)).toBe(false);
      if (sandbox === "on") expect(await appPort(apps[0]!.host)).not.toBe(takenPort);
    }, 240_000);

    it("an app that crashed while another process took its port restarts on a new port, and the edge follows", async () => {
      const repo = await git.createRepo();
      await pushApp(git, repo.owner, repo.repo);
      const project = await api<{ id: string; routes: { free: { hostname: string } } }>("/api/projects", { name: "port thief" });
      await api(`/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
      const d = await api<{ id: string }>("/api/deployments", { projectId: project.id });
      await until(
        "ready",
        () => api<{ status: string }>(`/api/deployments/${d.id}`),
        (v) => v.status === "ready" || v.status === "failed",
      ).then((v) => expect(v.status).toBe("ready"));
      const port = await appPort(project.routes.free.hostname);

      // The app exits right after answering /crash; the port is taken before its restart (1 s later).
      expect((await viaEdge(project.routes.free.hostname, "/crash")).body).toBe("bye");
      const holder = createServer((_req, res) => res.end("not the app"));
      holders.push(holder);
      // Taken as soon as the app let it go (or by a process of another test first: the same for the app).
      const bindBy = Date.now() + 900;
      while (Date.now() < bindBy) {
        const bound = await new Promise<boolean>((resolve) => holder.once("error", () => resolve(false)).listen(port, "127.0.0.1", () => resolve(true)));
        if (bound) break;
        await new Promise((r) => setTimeout(r, 20));
      }

      const answer = await until(
        "the app through the edge",
        () => viaEdge(project.routes.free.hostname),
        (a) => a.status === 200 && a.body.startsWith("{"),
        20_000,
      );
      expect(JSON.parse(answer.body)).toMatchObject({ version: expect.any(String) });
      expect(await appPort(project.routes.free.hostname)).not.toBe(port);
      const logs = await api<{ items: Array<{ message: string }> }>(`/api/projects/${project.id}/logs?deploymentId=${d.id}&limit=200`);
      expect(logs.items.map((l) => l.message).join("\n")).toContain(`Port ${port} is in use by another process`);
    }, 120_000);
  });
}
