/**
 * The hostile-app suites (test/node/sandbox/): a runner server as `npm start`
 * builds it, on Postgres (a fresh database, runner-harness's startRunnerServer) or
 * on PGlite in DATA_DIR/pglite (as the self-hosted default keeps it: its files
 * are there to be stolen), with canaries planted in the data directory, a git
 * test server of the suite's own (its own clone token, so a scan of every host
 * process cannot see another suite's) reached through a proxy that can hold a
 * fetch, and a LOCAL_ROOTS folder.
 *
 * Apps are deployed through the real API only: a folder upload (session,
 * upload through the relay, scan, ensure, build/access), a git repository (link,
 * POST /api/deployments) or a local folder (import, POST /api/deployments). The
 * hostile programs are test/fixtures/hostile/*.js, shipped together; the start
 * command picks one.
 *
 * Host-side views of a deployment: its cgroups (one per step or app process,
 * named `<deploymentId>.<n>` or `<deploymentId>.<process>.<n>` under the
 * runner's `wsp-<key>` group of each controller), their host pids, and each
 * pid's /proc environ, cmdline and CPU time.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, expect, inject } from "vitest";
import { createApp } from "../../functions/app";
import { DeploymentSchema } from "../../functions/deployments/schema";
import { ScanResultSchema, UploadTargetSchema } from "../../functions/projects/folder/schema";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { sandboxKey } from "../../functions/self-hosted/runner/sandbox/sandbox";
import { createNodeServices } from "../../functions/self-hosted/services";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPglite } from "../../shared/db/pglite";
import { deployments, logLines, sandboxUids } from "../../shared/db/schema";
import { jsonLogger } from "../../shared/http/logger";
import { GIT_ENV as GIT_IDENTITY, type GitTestServer, startGitServer } from "./git-server";
import { buildRequest, expectBody, expectStatus, type Member } from "./harness";
import { type Deployment, runnerClient } from "./runner-client";
import { freshDatabase } from "./fresh-database";
import { type RunnerServer, runnerTestSettings, startRunnerServer } from "./runner-harness";
import { gzip, tar, tarHeader } from "./tar-fixtures";
import { TEST_SECRET_KEYS } from "./test-keys";

const run = promisify(execFile);

export const HOSTILE = join(import.meta.dirname, "..", "fixtures", "hostile");

export type DbKind = "postgres" | "pglite";

/** Every hostile program, shipped together in each deployment (`node <name>.js` picks one). */
export function hostileFiles(extra: Record<string, string> = {}): Record<string, string> {
  const files: Record<string, string> = {};
  for (const name of readdirSync(HOSTILE)) if (name.endsWith(".js")) files[name] = readFileSync(join(HOSTILE, name), "utf8");
  return { ...files, ...extra };
}

// ---------------------------------------------------------------------------
// A git proxy that can hold a fetch

export interface HoldingProxy {
  url: string;
  /** The next `git-upload-pack` POST of the git command (the runner's fetch, not the API's own ls-remote) is held until release(); resolves once it arrived. */
  holdNextFetch(): Promise<void>;
  release(): void;
  close(): Promise<void>;
}

/** An HTTP proxy in front of the git test server (`target()`, read at each request): a slow host on demand. */
export async function startHoldingProxy(target: () => string): Promise<HoldingProxy> {
  let arm: (() => void) | undefined;
  let held: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    const forward = () => {
      const to = new URL(target());
      const upstream = http.request(
        { host: to.hostname, port: Number(to.port), method: req.method, path: req.url, headers: req.headers, agent: false },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    };
    // The API's ls-remote names itself in its user agent; the runner's fetch is the machine's git.
    const fromApi = String(req.headers["user-agent"] ?? "").includes("workspace-service");
    if (arm && !fromApi && req.method === "POST" && (req.url ?? "").includes("/git-upload-pack")) {
      req.pause();
      held.push(forward);
      const arrived = arm;
      arm = undefined;
      arrived();
      return;
    }
    forward();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const release = () => {
    const waiting = held;
    held = [];
    for (const go of waiting) go();
  };
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holdNextFetch: () =>
      new Promise<void>((resolve) => {
        arm = resolve;
      }),
    release,
    close: () =>
      new Promise<void>((resolve) => {
        release();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// ---------------------------------------------------------------------------
// The servers

/** The runner server of the Postgres suites' twin on PGlite: the database in DATA_DIR/pglite, as `npm start` keeps it without DATABASE_URL. */
export async function startPgliteRunnerServer(opts: { dataDir: string; gitUrl: string; env?: Record<string, string> }): Promise<RunnerServer> {
  const keyring = await createKeyring(TEST_SECRET_KEYS);
  const logs: string[] = [];
  const logger = jsonLogger((line) => logs.push(line));
  const config = loadNodeConfig({ ...runnerTestSettings(opts), ...opts.env });
  const pgliteDir = join(opts.dataDir, "pglite");
  mkdirSync(pgliteDir, { mode: 0o700 });
  // The suites' migrated dump, loaded into a data directory of files (the in-memory database has none to steal).
  const database = await openPglite({ dataDir: pgliteDir, loadDataDir: new Blob([readFileSync(inject("pgliteDump"))]), migrate: false });
  const node = await createNodeServices(config, database, keyring, logger);
  const app = createApp({ services: () => node.services, logger, extraRouters: node.extraRouters });
  node.start();
  let closed: Promise<void> | undefined;
  return {
    runtime: "node-pglite",
    realConcurrency: false,
    db: database.db,
    keyring,
    logs,
    dataDir: opts.dataDir,
    node,
    request: async (path, init) => app.fetch(buildRequest(path, init)),
    close: () =>
      (closed ??= (async () => {
        await node.close();
        await database.close();
      })()),
  };
}

export interface Canaries {
  /** DATA_DIR/owner-token's content (0600, as the server writes it). */
  ownerToken: string;
  /** DATA_DIR/secret-keys's content. */
  secretKeys: string;
}

export interface SandboxSuite {
  kind: DbKind;
  server: RunnerServer;
  git: GitTestServer;
  proxy: HoldingProxy;
  dataDir: string;
  /** LOCAL_ROOTS of the server (a real path). */
  localRoot: string;
  canaries: Canaries;
  /** The git test server's clone token (this suite's own). */
  cloneToken: string;
  /** Postgres: the server's DATABASE_URL. */
  databaseUrl?: string;
}

const canary = (what: string) => `${what}-canary-${Math.random().toString(36).slice(2, 12)}${Date.now().toString(36)}`;

/**
 * One runner server for the file's tests, on `kind`, opened in beforeAll (60 s)
 * and closed in afterAll with everything it wrote. `env`: settings over the
 * harness's (RUNNER_LOG_RATE, …), as an operator writes them.
 */
export function useSandboxServer(opts: { kind: DbKind; prefix: string; env?: Record<string, string>; dataDirIn?: string }): SandboxSuite {
  const s = { kind: opts.kind } as SandboxSuite;
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    // LOCAL_ROOTS must exist when the configuration is read.
    s.localRoot = realpathSync(mkdtempSync(join(tmpdir(), `${opts.prefix}-local-`)));
    s.cloneToken = canary("clone-token");
    s.git = await startGitServer({ token: s.cloneToken });
    s.proxy = await startHoldingProxy(() => s.git.url);
    const env = { LOCAL_ROOTS: s.localRoot, ...opts.env };
    const dataDir = mkdtempSync(join(opts.dataDirIn ?? tmpdir(), `${opts.prefix}-data-`));
    s.dataDir = dataDir;
    if (opts.kind === "postgres") {
      const db = await freshDatabase(inject("pgUrl"), opts.prefix, { migrate: true });
      drop = async () => {
        await db.drop();
        rmSync(dataDir, { recursive: true, force: true });
      };
      s.databaseUrl = db.url;
      s.server = await startRunnerServer({ databaseUrl: db.url, dataDir, gitUrl: s.proxy.url, env });
    } else {
      drop = async () => rmSync(dataDir, { recursive: true, force: true });
      s.server = await startPgliteRunnerServer({ dataDir, gitUrl: s.proxy.url, env });
    }
    s.canaries = { ownerToken: canary("owner-token"), secretKeys: canary("secret-keys") };
    writeFileSync(join(s.dataDir, "owner-token"), `${s.canaries.ownerToken}\n`, { mode: 0o600 });
    writeFileSync(join(s.dataDir, "secret-keys"), `${s.canaries.secretKeys}\n`, { mode: 0o600 });
  }, 60_000);
  afterAll(async () => {
    const groups = s.server?.node.runner ? [...runnerGroups(s).values()] : [];
    await s.server?.close();
    // The runner leaves its (empty) parent groups behind: removed with the rest of what the suite made.
    for (const dir of groups) {
      try {
        rmdirSync(dir);
      } catch {
        // Not empty (a group of a process still running): the next start's sweep has it.
      }
    }
    await s.proxy?.close();
    await s.git?.close();
    await drop?.();
    if (s.localRoot) rmSync(s.localRoot, { recursive: true, force: true });
  }, 60_000);
  return s;
}

// ---------------------------------------------------------------------------
// Deploying through the API

export interface AppSetup {
  /** Project options (startCommand, buildCommand, installCommand, outputDirectory, rootDirectory). */
  options?: Record<string, string>;
  vars?: Array<{ key: string; value: string; isSecret?: boolean }>;
  /** PATCH /api/projects/{id}/resources body. */
  resources?: Record<string, unknown>;
}

export interface Deployed {
  projectId: string;
  deployment: Deployment;
}

const GIT_ENV = { ...process.env, ...GIT_IDENTITY };

/** The files at the root of an upload's tarball, under one top folder (as the CLI packs a folder). */
export async function tarballOf(files: Record<string, string | Uint8Array>): Promise<Uint8Array> {
  return gzip(tar([{ name: "app/", type: "5" }, ...Object.entries(files).map(([name, content]) => ({ name: `app/${name}`, content }))]));
}

/**
 * A gzipped tarball of exactly `entries` entries: the top folder `app/`, the
 * `files`, a folder `app/f/` and empty files in it for the rest.
 */
export async function manyEntriesTarball(entries: number, files: Record<string, string>): Promise<Uint8Array> {
  const named = Object.entries(files);
  const empties = entries - 2 - named.length;
  async function* blocks(): AsyncGenerator<Uint8Array> {
    yield tar([{ name: "app/", type: "5" }, ...named.map(([name, content]) => ({ name: `app/${name}`, content })), { name: "app/f/", type: "5" }]).subarray(
      0,
      -1024,
    );
    const batch = 4096;
    for (let i = 0; i < empties; i += batch) {
      const n = Math.min(batch, empties - i);
      const out = new Uint8Array(n * 512);
      for (let j = 0; j < n; j++) out.set(tarHeader(`app/f/${i + j}`, 0), j * 512);
      yield out;
    }
    yield new Uint8Array(1024);
  }
  return gzip(blocks());
}

export function sandboxApps(s: SandboxSuite) {
  const c = runnerClient(
    () => s.server,
    () => s.git,
  );
  const call = c.call;

  async function configure(t: Member, projectId: string, setup: AppSetup) {
    if (setup.options) await expectStatus(await call(t, `/api/projects/${projectId}/options`, { json: setup.options }), 200);
    if (setup.vars?.length) await c.setVars(t, projectId, setup.vars);
    if (setup.resources) await expectStatus(await call(t, `/api/projects/${projectId}/resources`, { method: "PATCH", json: setup.resources }), 200);
  }

  /** The folder-upload flow: session, upload (relay), scan, ensure (a new project unless `projectId`), setup, build/access. */
  async function uploadDeploy(
    t: Member,
    files: Record<string, string | Uint8Array>,
    setup: AppSetup = {},
    projectId?: string,
    tarball?: Uint8Array,
  ): Promise<Deployed> {
    const bytes = tarball ?? (await tarballOf(files));
    const target = await expectBody(
      await s.server.request("/api/projects/folder/session", { token: t.token, org: t.orgId, json: { name: "hostile", sizeBytes: bytes.length } }),
      201,
      UploadTargetSchema,
    );
    const up = await s.server.request(target.url, {
      method: target.method,
      token: t.token,
      org: t.orgId,
      headers: target.headers,
      body: bytes as Uint8Array<ArrayBuffer>,
    });
    if (up.status !== 200) throw new Error(`upload: ${up.status} ${await up.text()}`);
    await expectBody(
      await s.server.request(`/api/projects/folder/scan/${target.sessionId}`, { method: "POST", token: t.token, org: t.orgId }),
      200,
      ScanResultSchema,
    );
    const ensured = await expectStatus<{ id: string }>(
      await call(t, "/api/projects/ensure", {
        json: {
          name: `hostile ${Math.random().toString(36).slice(2, 8)}`,
          gitProvider: "upload",
          uploadSessionId: target.sessionId,
          ...(projectId ? { projectId } : {}),
        },
      }),
      projectId ? 200 : 201,
    );
    await configure(t, ensured.id, setup);
    const access = await expectStatus<{ deployment: { id: string } }>(
      await call(t, "/api/deployments/build/access", { json: { projectId: ensured.id, uploadSessionId: target.sessionId } }),
      201,
    );
    return { projectId: ensured.id, deployment: await c.read(t, access.deployment.id) };
  }

  /** A repository of the suite's git server holding exactly `files` and `links` (name → target) on trunk, private when asked. */
  async function pushRepo(files: Record<string, string>, links: Record<string, string> = {}, opts: { private?: boolean } = {}) {
    const repo = await s.git.createRepo({ private: opts.private });
    const work = mkdtempSync(join(tmpdir(), "ws-sbx-push-"));
    try {
      const bare = join(s.git.root, "repos", repo.owner, `${repo.repo}.git`);
      await run("git", ["clone", "--quiet", "--branch", "trunk", bare, work], { env: GIT_ENV });
      for (const [name, content] of Object.entries(files)) {
        mkdirSync(dirname(join(work, name)), { recursive: true });
        writeFileSync(join(work, name), content);
      }
      for (const [name, to] of Object.entries(links)) {
        mkdirSync(dirname(join(work, name)), { recursive: true });
        symlinkSync(to, join(work, name));
      }
      await run("git", ["add", "-A"], { cwd: work, env: GIT_ENV });
      await run("git", ["commit", "--quiet", "--allow-empty", "-m", "hostile app"], { cwd: work, env: GIT_ENV });
      await run("git", ["push", "--quiet", "origin", "HEAD:refs/heads/trunk"], { cwd: work, env: GIT_ENV });
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    return repo;
  }

  /** A project linked to a new repository of `files` and `links`, configured; not deployed. */
  async function gitProject(
    t: Member,
    files: Record<string, string>,
    links: Record<string, string> = {},
    setup: AppSetup = {},
    opts: { private?: boolean } = {},
  ) {
    const p = await expectStatus<{ id: string }>(
      await call(t, "/api/projects", { json: { name: `hostile git ${Math.random().toString(36).slice(2, 8)}` } }),
      201,
    );
    const repo = await pushRepo(files, links, opts);
    if (opts.private) await expectStatus(await call(t, `/api/projects/${p.id}/clone-token`, { method: "PATCH", json: { token: s.cloneToken } }), 200);
    await expectStatus(await call(t, `/api/projects/${p.id}/git/link`, { json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }), 200);
    await configure(t, p.id, setup);
    return { projectId: p.id, repo };
  }

  /** POST /api/deployments for a git or local project. */
  const deploy = async (t: Member, projectId: string) => expectBody(await call(t, "/api/deployments", { json: { projectId } }), 201, DeploymentSchema);

  /** A local-folder project (a folder of `files` under LOCAL_ROOTS, imported), configured, deployed. */
  async function localDeploy(t: Member, files: Record<string, string>, setup: AppSetup = {}): Promise<Deployed & { folder: string }> {
    const folder = mkdtempSync(join(s.localRoot, "app-"));
    for (const [name, content] of Object.entries(files)) writeFileSync(join(folder, name), content);
    const p = await expectStatus<{ id: string }>(await call(t, "/api/projects/import", { json: { path: folder } }), 201);
    await configure(t, p.id, setup);
    return { projectId: p.id, deployment: await deploy(t, p.id), folder };
  }

  /** Waits for one of `statuses` (ready/failed by default). */
  const settle = (t: Member, id: string, statuses = ["ready", "failed"], timeoutMs = 45_000) => c.waitFor(t, id, statuses, timeoutMs);

  /** Every stored line of the deployment, as one text (one line per row), and the rows. */
  async function lines(deploymentId: string) {
    const rows = await s.server.db
      .select({ kind: logLines.kind, stream: logLines.stream, message: logLines.message, at: logLines.at })
      .from(logLines)
      .where(eq(logLines.deploymentId, deploymentId))
      .orderBy(logLines.seq);
    return { rows, text: rows.map((r) => r.message).join("\n") };
  }

  /** The app's answer (its port read from the database, as the edge reads it). */
  async function ask(projectId: string, path = "/"): Promise<{ status: number; body: string }> {
    const port = await c.currentPort(projectId);
    if (!port) throw new Error(`project ${projectId} has no current port`);
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: res.status, body: await res.text() };
  }

  const uidOf = async (projectId: string) => (await s.server.db.select().from(sandboxUids).where(eq(sandboxUids.projectId, projectId)))[0]?.uid;

  const workDirOf = (deploymentId: string) => join(s.dataDir, "deployments", deploymentId);

  /**
   * Deletes the project through the API, waits until none of its deployments
   * runs (the reconcile loop stops them) and their cgroups are gone, then
   * removes their work directories (what a test wrote).
   */
  async function retire(t: Member, projectId: string) {
    const ids = (await s.server.db.select({ id: deployments.id }).from(deployments).where(eq(deployments.projectId, projectId))).map((r) => r.id);
    const res = await call(t, `/api/projects/${projectId}`, { method: "DELETE" });
    if (res.status !== 200 && res.status !== 404) throw new Error(`DELETE project: ${res.status} ${await res.text()}`);
    s.server.node.runner?.wake();
    const runner = s.server.node.runner!;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const running = runner.supervisor.running().some((a) => ids.includes(a.deploymentId)) || runner.active().some((id) => ids.includes(id));
      if (!running && ids.every((id) => cgroupsOf(s, id).length === 0)) break;
      await sleep(100);
    }
    // Still there after the reconcile had its turns: stopped directly (what a test leaves must not outlive it).
    for (const id of ids) await runner.supervisor.stop(id);
    for (const id of ids) rmSync(workDirOf(id), { recursive: true, force: true });
  }

  return { c, call, configure, uploadDeploy, pushRepo, gitProject, deploy, localDeploy, settle, lines, ask, uidOf, workDirOf, retire };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Host-side views

export type Controller = "pids" | "memory" | "cpu" | "freezer";

/** The runner's parent group `wsp-<key>` in each mounted v1 controller (as cgroups.ts finds them). */
export function runnerGroups(s: SandboxSuite): Map<Controller, string> {
  const key = sandboxKey(s.server.node.runner!.id);
  const mounts = readFileSync("/proc/self/mounts", "utf8").split("\n");
  const own = readFileSync("/proc/self/cgroup", "utf8").split("\n");
  const out = new Map<Controller, string>();
  for (const controller of ["pids", "memory", "cpu", "freezer"] as const) {
    const mount = mounts.map((l) => l.split(" ")).find((f) => f[2] === "cgroup" && (f[3] ?? "").split(",").includes(controller))?.[1];
    if (!mount) continue;
    const ownPath = own.map((l) => l.split(":")).find((f) => (f[1] ?? "").split(",").includes(controller))?.[2] ?? "/";
    const base = join(mount, ownPath, `wsp-${key}`);
    if (existsSync(base)) out.set(controller, base);
  }
  return out;
}

/** The deployment's cgroups (one per step or app process), as { controller, dir }. */
export function cgroupsOf(s: SandboxSuite, deploymentId: string, only?: Controller): Array<{ controller: Controller; dir: string; name: string }> {
  const out: Array<{ controller: Controller; dir: string; name: string }> = [];
  for (const [controller, base] of runnerGroups(s)) {
    if (only && controller !== only) continue;
    let names: string[] = [];
    try {
      names = readdirSync(base);
    } catch {
      continue;
    }
    for (const name of names) if (name.startsWith(`${deploymentId}.`)) out.push({ controller, dir: join(base, name), name });
  }
  return out;
}

/** A cgroup file's text, or undefined once the group is gone. */
export function cgroupFile(dir: string, file: string): string | undefined {
  try {
    return readFileSync(join(dir, file), "utf8");
  } catch {
    return undefined;
  }
}

/** Host pids of every process of the deployment now (its groups' cgroup.procs in the pids controller, else any). */
export function hostPidsOf(s: SandboxSuite, deploymentId: string): number[] {
  const groups = cgroupsOf(s, deploymentId, "pids");
  const list = groups.length ? groups : cgroupsOf(s, deploymentId);
  const pids = new Set<number>();
  for (const g of list) for (const p of (cgroupFile(g.dir, "cgroup.procs") ?? "").split("\n")) if (p.trim()) pids.add(Number(p));
  return [...pids];
}

/** /proc/<pid>/<file> as text (NULs as spaces), or undefined when unreadable or gone. */
export function procText(pid: number | string, file: "environ" | "cmdline"): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${file}`, "latin1").replaceAll("\0", " ");
  } catch {
    return undefined;
  }
}

/** Every host process's pid. */
export const allHostPids = () => readdirSync("/proc").filter((n) => /^\d+$/.test(n));

const CLOCK_TICKS = 100;

/** utime + stime of a process in seconds (0 once gone). */
export function cpuSecondsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // After the command: state is field 3; utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** One API call's time, in ms (the call must answer 200). */
export async function timedCall(s: SandboxSuite, t: Member, path = "/api/projects"): Promise<number> {
  const started = performance.now();
  const res = await s.server.request(path, { token: t.token, org: t.orgId });
  await res.arrayBuffer();
  const took = performance.now() - started;
  expect(res.status).toBe(200);
  return took;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** `count` API calls one after the other, `gapMs` apart: their times. */
export async function latencies(s: SandboxSuite, t: Member, count: number, gapMs = 10): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    out.push(await timedCall(s, t));
    if (gapMs) await sleep(gapMs);
  }
  return out;
}
