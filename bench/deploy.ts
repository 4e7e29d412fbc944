/**
 * `npm run bench:deploy`: the self-hosted runner's overhead. A real server
 * (startSelfHosted on a fresh Postgres database, runner on) and the real git
 * test host; the fixture app (test/fixtures/apps/node-app: build and start
 * scripts, no dependencies) in a repository there.
 *
 * - runner: time from `POST /api/deployments` to the deployment reading `ready`
 *   (GET polled every 20 ms), BENCH_RUNS (default 3) deploys, median.
 * - by hand: the same commands as child processes in the same run: git init,
 *   fetch of the commit at depth 1, checkout, `npm install`, `npm run build`,
 *   `npm start` until it answers HTTP on its PORT; median of as many runs.
 *
 * Prints both, and the ratio runner / by hand (target ≤ 1.15x).
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startSelfHosted } from "../functions/self-hosted/start";
import { loadNodeConfig } from "../functions/self-hosted/config";
import { freshDatabase } from "../test/support/fresh-database";
import { startGitServer } from "../test/support/git-server";
import { pushApp } from "../test/support/runner-harness";

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
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

async function main() {
  const git = await startGitServer();
  const db = await freshDatabase(PG, "bench_deploy", { migrate: true });
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
    }),
    () => {},
  );
  try {
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
    const repo = await git.createRepo();
    const sha = await pushApp(git, repo.owner, repo.repo);
    const project = await api("/api/projects", { json: { name: "bench app" } });
    await api(`/api/projects/${project.id}/git/link`, { json: { provider: "gitea", owner: repo.owner, repo: repo.repo } });

    const runner: number[] = [];
    const hand: number[] = [];
    // Alternating, after one warm-up of each (npm's first start is slower).
    for (let i = -1; i < RUNS; i++) {
      const start = performance.now();
      const d = await api("/api/deployments", { json: { projectId: project.id } });
      for (;;) {
        const now = await api(`/api/deployments/${d.id}`);
        if (now.status === "ready") break;
        if (now.status === "failed" || now.status === "canceled") throw new Error(`deploy ${now.status}: ${now.failureReason}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const took = performance.now() - start;
      const manual = await byHand(repo.url, sha);
      if (i >= 0) {
        runner.push(took);
        hand.push(manual);
      }
    }
    const r = median(runner);
    const h = median(hand);
    console.log(`runner: POST /api/deployments → ready, median of ${RUNS}: ${fmt(r)} (${runner.map(fmt).join(", ")})`);
    console.log(`by hand: clone + npm install + npm run build + npm start until it answers, median of ${RUNS}: ${fmt(h)} (${hand.map(fmt).join(", ")})`);
    console.log(`ratio: ${(r / h).toFixed(2)}x (target ≤ 1.15x)`);
    if (process.env.BENCH_VERBOSE) {
      const list = (await api(`/api/projects/${project.id}/deployments?limit=1`)) as {
        items: Array<{ id: string; transitions: Array<{ status: string; at: string }> }>;
      };
      const last = list.items[0]!;
      const logs = (await api(`/api/deployments/${last.id}/logs?limit=200`)) as { items: Array<{ timestamp: string; stream: string; message: string }> };
      const t0 = Date.parse(last.transitions[0]!.at);
      for (const t of last.transitions) console.log(`${Date.parse(t.at) - t0} ms  [${t.status}]`);
      for (const l of logs.items) console.log(`${Date.parse(l.timestamp) - t0} ms  ${l.stream}: ${l.message}`);
    }
  } finally {
    await server.close();
    await git.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
