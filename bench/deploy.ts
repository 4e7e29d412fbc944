/**
 * `npm run bench:deploy`: the self-hosted runner's overhead, and the sandbox's.
 * Two real servers (startSelfHosted on fresh Postgres databases, runner on): one
 * with the sandbox (the default), one with RUNNER_SANDBOX=off; the real git test
 * host; the fixture app (test/fixtures/apps/node-app: build and start scripts)
 * with one real dependency from the registry (is-number), so `npm install`
 * reaches the registry like a user's app does (BENCH_NO_DEPS=1: none).
 *
 * - runner: time from `POST /api/deployments` to the build-log stream's `end`
 *   event saying `ready` (what `wsp deploy` waits for), BENCH_RUNS (default 3) deploys per server, median.
 * - by hand: the same commands as child processes in the same run: git init,
 *   fetch of the commit at depth 1, checkout, `npm install`, `npm run build`,
 *   `npm start` until it answers HTTP on its PORT; median of as many runs.
 *   Rounds alternate sandboxed, unconfined and by hand.
 * - app latency: BENCH_REQUESTS (default 500) sequential GETs of each server's
 *   app through its edge (Host: the free route) and straight to the app's port,
 *   in 4 interleaved rounds (the first discarded), the median of the rounds' p50.
 *
 * Prints the ratios runner / by hand (target ≤ 1.15x, sandboxed) and the edge
 * latencies with and without the sandbox (target: no measurable p50 difference).
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { startSelfHosted } from "../functions/self-hosted/start";
import { loadNodeConfig } from "../functions/self-hosted/config";
import { follow } from "../functions/cli/sse";
import { freshDatabase } from "../test/support/fresh-database";
import { startGitServer } from "../test/support/git-server";
import { pushApp, REGISTRY_DEPENDENCY_PACKAGE } from "../test/support/runner-harness";
import { httpGet, report, sequentialLatency } from "./common";

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 500);
const WITH_DEPS = !process.env.BENCH_NO_DEPS;
/** The machine's global npmrc (CA, registry): what the sandbox shows the build as /etc/npmrc, given to the commands by hand too. */
const NPMRC = ["/usr/local/etc/npmrc", "/usr/etc/npmrc", "/etc/npmrc"].find((p) => existsSync(p));
const PG = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const TOKEN = "bench-owner-token-0123456789abcdef0123456789";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function untilAnswers(port: number, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await (await fetch(`http://127.0.0.1:${port}/`)).arrayBuffer();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error("the app did not answer");
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

async function byHand(url: string, sha: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "bench-hand-"));
  const env = {
    PATH: process.env.PATH!,
    HOME: dir,
    LANG: "C.UTF-8",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    ...(NPMRC ? { npm_config_globalconfig: NPMRC } : {}),
  };
  const start = performance.now();
  const sh = async (command: string) => {
    const t = performance.now();
    await run("/bin/sh", ["-c", command], { cwd: join(dir, "src"), env });
    if (process.env.BENCH_VERBOSE) console.log(`  by hand: ${command.slice(0, 40)}: ${(performance.now() - t).toFixed(0)} ms`);
  };
  await run("mkdir", ["-p", join(dir, "src")]);
  await sh("git init --quiet .");
  await sh(`git fetch --quiet --depth 1 --no-tags '${url}' ${sha}`);
  await sh(`git checkout --quiet --detach ${sha}`);
  await sh("npm install");
  await sh("npm run build");
  const port = await freePort();
  const app = spawn("/bin/sh", ["-c", "npm start"], {
    cwd: join(dir, "src"),
    env: { ...env, PORT: String(port), NODE_ENV: "production" },
    detached: true,
    stdio: "ignore",
  });
  const t = performance.now();
  await untilAnswers(port);
  if (process.env.BENCH_VERBOSE) console.log(`  by hand: npm start until it answers: ${(performance.now() - t).toFixed(0)} ms`);
  const took = performance.now() - start;
  process.kill(-app.pid!, "SIGKILL");
  rmSync(dir, { recursive: true, force: true });
  return took;
}

interface BenchServer {
  label: string;
  api: (path: string, init?: { method?: string; json?: unknown }) => Promise<Record<string, unknown>>;
  url: string;
  projectId: string;
  /** Where the deployment's app listens (the database's record; the API does not show ports). */
  portOf(deploymentId: string): Promise<number | undefined>;
  close(): Promise<void>;
}

async function openServer(
  label: string,
  git: Awaited<ReturnType<typeof startGitServer>>,
  repo: { owner: string; repo: string },
  env: Record<string, string>,
): Promise<BenchServer> {
  const db = await freshDatabase(PG, `bench_deploy_${label}`, { migrate: true });
  const dataDir = mkdtempSync(join(tmpdir(), "bench-deploy-"));
  const server = await startSelfHosted(
    loadNodeConfig({
      PORT: "0",
      DATA_DIR: dataDir,
      DATABASE_URL: db.url,
      WORKSPACE_OWNER_TOKEN: TOKEN,
      GIT_GITEA_URL: git.url,
      OUTBOUND_ALLOW_PRIVATE: "true",
      LOG_LEVEL: "silent",
      STOP_GRACE: "1s",
      // The pipeline's own time is measured: the smoke window is a deliberate wait on top of it (README, Deployments).
      SMOKE_WINDOW: "0s",
      ...env,
    }),
    () => {},
  );
  const api = async (path: string, init: { method?: string; json?: unknown } = {}) => {
    const res = await fetch(`${server.url}${path}`, {
      method: init.method ?? (init.json ? "POST" : "GET"),
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: init.json ? JSON.stringify(init.json) : undefined,
    });
    const body = await res.json();
    if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    return body as Record<string, unknown>;
  };
  const project = await api("/api/projects", { json: { name: `bench ${label}` } });
  await api(`/api/projects/${project.id}/git/link`, { json: { provider: "gitea", owner: repo.owner, repo: repo.repo } });
  return {
    label,
    api,
    url: server.url,
    projectId: project.id as string,
    portOf: async (id) => {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        return (await client.query<{ port: number | null }>("select port from deployments where id = $1", [id])).rows[0]?.port ?? undefined;
      } finally {
        await client.end();
      }
    },
    close: async () => {
      await server.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * POST /api/deployments → the user sees `ready`, in ms: as `wsp deploy` sees it, by following the
 * build-log stream to its `end` event (not by polling, which would load the 2 cores the build runs on).
 */
async function deployOnce(s: BenchServer): Promise<number> {
  const start = performance.now();
  const d = await s.api("/api/deployments", { json: { projectId: s.projectId } });
  // A runner that did not start (no bubblewrap, not root) leaves it queued: say so instead of waiting forever.
  const end = await follow({
    url: `${s.url}/api/deployments/${d.id}/logs/stream`,
    token: () => TOKEN,
    onLine: () => {},
    signal: AbortSignal.timeout(120_000),
  });
  if (!end) throw new Error(`${s.label}: still not finished after 120 s (is the runner running? bubblewrap installed?)`);
  if (end.status !== "ready") throw new Error(`${s.label}: deploy ${end.status}: ${end.failureReason}`);
  return performance.now() - start;
}

async function main() {
  const git = await startGitServer();
  const repo = await git.createRepo();
  const sha = await pushApp(git, repo.owner, repo.repo, "trunk", WITH_DEPS ? REGISTRY_DEPENDENCY_PACKAGE : {});
  const sandboxed = await openServer("sandbox", git, repo, {});
  const unconfined = await openServer("unconfined", git, repo, { RUNNER_SANDBOX: "off" });
  try {
    const times = { sandbox: [] as number[], unconfined: [] as number[], hand: [] as number[] };
    // Alternating, after one warm-up of each (npm's first install and start are slower).
    for (let i = -1; i < RUNS; i++) {
      const a = await deployOnce(sandboxed);
      const b = await deployOnce(unconfined);
      const c = await byHand(repo.url, sha);
      if (i >= 0) {
        times.sandbox.push(a);
        times.unconfined.push(b);
        times.hand.push(c);
      }
    }
    const [s, u, h] = [median(times.sandbox), median(times.unconfined), median(times.hand)];
    const what = `clone + npm install${WITH_DEPS ? " (1 registry dependency)" : ""} + npm run build + npm start until it answers`;
    console.log(`runner, sandboxed: POST /api/deployments → ready, median of ${RUNS}: ${fmt(s)} (${times.sandbox.map(fmt).join(", ")})`);
    console.log(`runner, RUNNER_SANDBOX=off: median of ${RUNS}: ${fmt(u)} (${times.unconfined.map(fmt).join(", ")})`);
    console.log(`by hand: ${what}, median of ${RUNS}: ${fmt(h)} (${times.hand.map(fmt).join(", ")})`);
    report({
      measure: "deployment, sandboxed runner: queued → ready",
      figure: fmt(s),
      floor: `${fmt(h)} (the same commands by hand)`,
      ratio: s / h,
      target: "≤ 1.15x",
      met: Number((s / h).toFixed(2)) <= 1.15,
    });
    console.log(
      `ratio sandboxed / by hand: ${(s / h).toFixed(2)}x (target ≤ 1.15x); unconfined / by hand: ${(u / h).toFixed(2)}x; sandbox / unconfined: ${(s / u).toFixed(2)}x`,
    );

    // Interleaved rounds (sandboxed, unconfined, sandboxed, …), the first discarded: the client's own warm-up must not favour whichever is measured last.
    const rounds = { sandbox: [] as Array<{ edge: number; direct: number }>, unconfined: [] as Array<{ edge: number; direct: number }> };
    for (let round = 0; round < 4; round++) {
      for (const server of [sandboxed, unconfined]) {
        const project = (await server.api(`/api/projects/${server.projectId}`)) as { routes: { free: { hostname: string } } };
        const [d] = ((await server.api(`/api/projects/${server.projectId}/deployments?limit=1`)) as { items: Array<{ id: string }> }).items;
        const port = await server.portOf(d!.id);
        if (!port) throw new Error(`${server.label}: the current deployment has no port`);
        // Every answer must be the app's own (not a page of the API or the edge).
        const { body } = await httpGet(`http://127.0.0.1:${port}/`);
        const edge = await sequentialLatency(`${server.url}/`, REQUESTS, { host: project.routes.free.hostname, expectedBody: body });
        const direct = await sequentialLatency(`http://127.0.0.1:${port}/`, REQUESTS, { expectedBody: body });
        if (round > 0) rounds[server.label as "sandbox" | "unconfined"].push({ edge: edge.p50, direct: direct.p50 });
      }
    }
    for (const [label, list] of Object.entries(rounds)) {
      const edge = median(list.map((r) => r.edge));
      const direct = median(list.map((r) => r.direct));
      console.log(
        `app latency (${label}), ${REQUESTS} sequential GETs, median p50 of ${list.length} interleaved rounds: through the edge ${edge.toFixed(3)} ms; the app directly ${direct.toFixed(3)} ms`,
      );
    }
    console.log(`edge p50 sandboxed / unconfined: ${(median(rounds.sandbox.map((r) => r.edge)) / median(rounds.unconfined.map((r) => r.edge))).toFixed(2)}x`);
    for (const server of process.env.BENCH_VERBOSE ? [sandboxed, unconfined] : []) {
      console.log(`timeline of the last deployment (${server.label}):`);
      const list = (await server.api(`/api/projects/${server.projectId}/deployments?limit=1`)) as {
        items: Array<{ id: string; transitions: Array<{ status: string; at: string }> }>;
      };
      const last = list.items[0]!;
      const logs = (await server.api(`/api/deployments/${last.id}/logs?limit=200`)) as {
        items: Array<{ timestamp: string; stream: string; message: string }>;
      };
      const t0 = Date.parse(last.transitions[0]!.at);
      for (const t of last.transitions) console.log(`${Date.parse(t.at) - t0} ms  [${t.status}]`);
      for (const l of logs.items) console.log(`${Date.parse(l.timestamp) - t0} ms  ${l.stream}: ${l.message}`);
    }
  } finally {
    await sandboxed.close();
    await unconfined.close();
    await git.close();
  }
}

await main();
