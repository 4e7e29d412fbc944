/**
 * A self-hosted server with its runner ON for the runner suites (test/node/runner/):
 * the services `npm start` builds (createNodeServices) over a Postgres database
 * of the suite's own (freshDatabase: other files' queued deployments are never
 * claimed, and concurrency is real), a data directory of its own, short
 * timeouts. `useRunnerServer` opens one per suite with a git test server
 * (beforeAll) and closes both (afterAll); its `reopen()` closes the server and
 * opens a new one on the same data and database (a server restart). Git
 * repositories with real files go to that git test server (pushApp).
 */
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, inject } from "vitest";
import { createApp } from "../../functions/app";
import { type RunnerSettings, loadNodeConfig } from "../../functions/self-hosted/config";
import { createNodeServices, type NodeServices } from "../../functions/self-hosted/services";
import { createKeyring, type Keyring } from "../../shared/crypto/keyring";
import { openPostgres } from "../../shared/db/postgres";
import { jsonLogger } from "../../shared/http/logger";
import { freshDatabase, type FreshDatabase } from "./fresh-database";
import { GIT_ENV as GIT_IDENTITY, type GitTestServer, startGitServer } from "./git-server";
import { buildRequest, type Harness, type RequestOptions } from "./harness";
import { TEST_SECRET_KEYS } from "./test-keys";

const run = promisify(execFile);

export const FIXTURE_APP = join(import.meta.dirname, "..", "fixtures", "apps", "node-app");

export interface RunnerServer extends Harness {
  dataDir: string;
  node: NodeServices;
  /** Structured log lines of the server (never the app's). */
  logs: string[];
}

export interface RunnerServerOptions {
  databaseUrl: string;
  dataDir: string;
  gitUrl: string;
  runner?: Partial<RunnerSettings>;
  /** More settings, as an operator would write them. */
  env?: Record<string, string>;
}

/** The runner suites' settings, as an operator writes them: builds time out after 60 s, apps get 20 s to answer, a 1 s stop grace. */
export function runnerTestSettings(opts: { dataDir: string; gitUrl: string }): Record<string, string> {
  return {
    DATA_DIR: opts.dataDir,
    SECRET_KEYS: TEST_SECRET_KEYS,
    SHARED_DOMAIN: "apps.test",
    OUTBOUND_ALLOW_PRIVATE: "true",
    GIT_GITEA_URL: opts.gitUrl,
    RUNNER: "on",
    BUILD_TIMEOUT: "60s",
    HEALTH_TIMEOUT: "20s",
    STOP_GRACE: "1s",
    // Tests that need the smoke window set their own.
    SMOKE_WINDOW: "0s",
  };
}

/** A runner server on the suite's Postgres database with runnerTestSettings. */
export async function startRunnerServer(opts: RunnerServerOptions): Promise<RunnerServer> {
  const keyring: Keyring = await createKeyring(TEST_SECRET_KEYS);
  const logs: string[] = [];
  const logger = jsonLogger((line) => logs.push(line));
  const config = loadNodeConfig({ ...runnerTestSettings(opts), DATABASE_URL: opts.databaseUrl, ...opts.env });
  const database = await openPostgres(opts.databaseUrl, { migrate: false, max: 10 });
  const node = await createNodeServices(config, database, keyring, logger, { runner: opts.runner });
  const app = createApp({ services: () => node.services, logger, extraRouters: node.extraRouters });
  node.start();
  let closed: Promise<void> | undefined;
  return {
    runtime: "node-postgres",
    realConcurrency: true,
    db: database.db,
    keyring,
    logs,
    dataDir: opts.dataDir,
    node,
    request: async (path: string, init?: RequestOptions) => app.fetch(buildRequest(path, init)),
    close: () =>
      (closed ??= (async () => {
        await node.close();
        await database.close();
      })()),
  } as RunnerServer;
}

/** A migrated database and a data directory for one suite; dropped and removed by `drop`. */
export async function runnerFixture(prefix: string): Promise<{ db: FreshDatabase; dataDir: string; drop(): Promise<void> }> {
  const db = await freshDatabase(inject("pgUrl"), prefix, { migrate: true });
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-data-`));
  return {
    db,
    dataDir,
    drop: async () => {
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A suite's runner server, with the git test server it reads repositories from. */
export interface RunnerSuite extends RunnerServer {
  git: GitTestServer;
  /** Closes the server (if the test has not already) and opens a new one on the same database, data and git server: a server restart. */
  reopen(): Promise<void>;
}

/**
 * The runner suites' setup: in beforeAll (60 s) a git test server, a database
 * and data directory of the suite's own (runnerFixture(prefix)) and a runner
 * server over them; in afterAll all closed and dropped. The object returned is
 * filled in once started and keeps its identity across `reopen()`, so test
 * bodies and `runnerClient(() => server, ...)` hold it from the start.
 */
export function useRunnerServer(opts: { prefix: string } & Pick<RunnerServerOptions, "runner" | "env">): RunnerSuite {
  const s = {} as RunnerSuite;
  let fixture: Awaited<ReturnType<typeof runnerFixture>> | undefined;
  const open = async () => {
    Object.assign(
      s,
      await startRunnerServer({ databaseUrl: fixture!.db.url, dataDir: fixture!.dataDir, gitUrl: s.git.url, runner: opts.runner, env: opts.env }),
    );
  };
  beforeAll(async () => {
    s.git = await startGitServer();
    fixture = await runnerFixture(opts.prefix);
    await open();
  }, 60_000);
  afterAll(async () => {
    await s.close?.();
    await s.git?.close();
    await fixture?.drop();
  });
  s.reopen = async () => {
    await s.close();
    await open();
  };
  return s;
}

const GIT_ENV = { ...process.env, ...GIT_IDENTITY };

/**
 * Commits the fixture app (plus `extra` files) onto `branch` of a repository of
 * the test git server and returns the commit.
 */
export async function pushApp(git: GitTestServer, owner: string, repo: string, branch = "trunk", extra: Record<string, string> = {}): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), "ws-push-"));
  try {
    const bare = join(git.root, "repos", owner, `${repo}.git`);
    await run("git", ["clone", "--quiet", "--branch", branch, bare, work], { env: GIT_ENV });
    cpSync(FIXTURE_APP, work, { recursive: true });
    for (const [name, content] of Object.entries(extra)) writeFileSync(join(work, name), content);
    await run("git", ["add", "-A"], { cwd: work, env: GIT_ENV });
    await run("git", ["commit", "--quiet", "--allow-empty", "-m", "the app"], { cwd: work, env: GIT_ENV });
    await run("git", ["push", "--quiet", "origin", `HEAD:refs/heads/${branch}`], { cwd: work, env: GIT_ENV });
    return (await run("git", ["rev-parse", "HEAD"], { cwd: work, env: GIT_ENV })).stdout.trim();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The fixture app's package.json with one real registry dependency (`pushApp` extra): its install reaches the registry as a user's does. */
export const REGISTRY_DEPENDENCY_PACKAGE = {
  "package.json": JSON.stringify({
    name: "runner-fixture-app",
    version: "1.0.0",
    private: true,
    dependencies: { "is-number": "7.0.0" },
    scripts: { build: "node build.js", start: "node server.js" },
  }),
};

/** The fixture app (plus `extra` files) as a gzipped tarball made by the machine's tar, under a top folder `app/`. */
export async function appTarball(extra: Record<string, string> = {}): Promise<Uint8Array> {
  const dir = mkdtempSync(join(tmpdir(), "ws-tgz-"));
  try {
    cpSync(FIXTURE_APP, join(dir, "app"), { recursive: true });
    for (const [name, content] of Object.entries(extra)) writeFileSync(join(dir, "app", name), content);
    const { stdout } = await run("tar", ["-czf", "-", "-C", dir, "app"], { encoding: "buffer", maxBuffer: 64 * 1024 * 1024 });
    return new Uint8Array(stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
