/**
 * `npm run bench:runners`: what build servers cost the control plane (issue 22).
 *
 * The API is the real self-hosted server (bench/edge-server.ts, compiled as `npm
 * start` compiles it, in its own process on a fresh Postgres database, RUNNER=off:
 * every deployment goes to a build server), so its CPU is measured alone.
 *
 * 1. Idle cost: the API's CPU over BENCH_IDLE_SECONDS (default 30) with no runner,
 *    then with BENCH_RUNNERS (default 10) idle runners long-polling
 *    `POST /api/runner/claim?wait=25` the way `wsp runner` does (functions/self-hosted/
 *    runner/http-control.ts), each a registered server with its own token. Printed:
 *    the API's CPU per idle runner per minute (ms).
 * 2. Claim latency: BENCH_CLAIMS (default 40) redeploys (`POST /api/deployments`) of
 *    an uploaded project placed on a server; the time from the API's answer
 *    (queued) to one of the idle runners receiving the claimed job, p50 and p99
 *    (target p99 ≤ 1 s). Each claimed job is canceled through the API at once.
 * 3. Forwarding: a real `wsp runner --edge-port` (sandboxed, as a server runs)
 *    builds and serves the fixture app; BENCH_REQUESTS (default 500) sequential
 *    GETs through the API's edge (Host: the app's free route: signed and forwarded
 *    to the server's edge, which proxies to the app) against the app hit directly
 *    (its port, the floor), in 4 interleaved rounds (the first discarded), the
 *    median p50 and p99 of the rounds, and the overhead.
 *
 * Then the same claim latency and forwarding against the Worker in workerd
 * (bench/runners-worker.ts). BENCH_RUNNERS_SIDES=node or =worker runs one half only.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import pg from "pg";
import { follow } from "../functions/cli/sse";
import { freshDatabase, type FreshDatabase } from "../test/support/fresh-database";
import { FIXTURE_APP } from "../test/support/runner-harness";
import { ADMIN_URL, ask, compiledEntry, httpGet, intEnv, report, stopChild, waitForMessage } from "./common";
import { call as callApi, claimLatencies, idleRunner, latencyRounds, median, ms, pct } from "./runner-measures";
import { workerHalf } from "./runners-worker";

const ROOT = resolve(import.meta.dirname, "..");
const WSP = join(ROOT, "functions/cli/wsp.mjs");
const RUNNERS = intEnv("BENCH_RUNNERS", 10, 1, 100);
const IDLE_SECONDS = intEnv("BENCH_IDLE_SECONDS", 30, 5, 600);
const CLAIMS = intEnv("BENCH_CLAIMS", 40, 5, 1000);
const REQUESTS = intEnv("BENCH_REQUESTS", 500, 50, 100_000);
const OWNER_TOKEN = "bench-runners-owner-token-0123456789abcdef";

let api: ChildProcess | undefined;
let db: FreshDatabase | undefined;
const dirs: string[] = [];
const children = new Set<ChildProcess>();

const call = <T = Record<string, unknown>>(base: string, path: string, init: { method?: string; json?: unknown; token?: string } = {}) =>
  callApi<T>(base, init.token ?? OWNER_TOKEN, path, init);

/** `wsp <args>` to its end; throws on a non-zero exit. */
function wsp(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [WSP, ...args], { env: { PATH: process.env.PATH, HOME: mkdtempSync(join(tmpdir(), "bench-runners-home-")) } });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  return new Promise((ok, fail) => child.on("close", (code) => (code === 0 ? ok(out) : fail(new Error(`wsp ${args[0]} exited ${code}: ${out.slice(-800)}`)))));
}

async function cpuOver(seconds: number): Promise<number> {
  await ask(api!, "reset", "reset-done", "API");
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return (await ask<{ cpuMs: number }>(api!, "stats", "stats", "API")).cpuMs;
}

/** Where the deployment's app listens (the database's record; the API does not show ports). */
async function portOf(url: string, id: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ port: number | null }>("select port from deployments where id = $1", [id])).rows[0]?.port ?? undefined;
  } finally {
    await client.end();
  }
}

const SIDES = new Set((process.env.BENCH_RUNNERS_SIDES ?? "node,worker").split(",").map((side) => side.trim()));

async function main() {
  if (SIDES.has("node")) await nodeHalf();
  if (SIDES.has("worker")) await workerHalf({ runners: RUNNERS, claims: CLAIMS, requests: REQUESTS });
}

async function nodeHalf() {
  db = await freshDatabase(ADMIN_URL, "bench_runners", { migrate: true });
  const dataDir = mkdtempSync(join(tmpdir(), "bench-runners-data-"));
  dirs.push(dataDir);
  api = spawn(process.execPath, [await compiledEntry(join(import.meta.dirname, "edge-server.ts"))], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: {
      ...process.env,
      BENCH_DB_URL: db.url,
      BENCH_DATA_DIR: dataDir,
      BENCH_OWNER_TOKEN: OWNER_TOKEN,
      // The build server's edge is on loopback here.
      BENCH_SERVER_ENV: JSON.stringify({ OUTBOUND_ALLOW_PRIVATE: "true" }),
    },
  });
  const { url: base } = await waitForMessage<{ url: string }>(api, "ready", 60_000, "API");
  console.log(`bench: ${RUNNERS} idle runners, ${IDLE_SECONDS} s idle windows, ${CLAIMS} claims, ${REQUESTS} GETs per round; API ${base}`);

  // An uploaded project, placed on servers: its redeploys are what the runners claim.
  const appDir = mkdtempSync(join(tmpdir(), "bench-runners-app-"));
  dirs.push(appDir);
  cpSync(FIXTURE_APP, appDir, { recursive: true });
  const servers: Array<{ id: string; token: string }> = [];
  for (let i = 0; i < RUNNERS; i++) servers.push(await call(base, "/api/servers", { json: { name: `idle-${i}` } }));

  // 1. Idle cost.
  const alone = await cpuOver(IDLE_SECONDS);
  const runners = servers.map((s) => idleRunner(base, s.token));
  await new Promise((r) => setTimeout(r, 1000));
  const withRunners = await cpuOver(IDLE_SECONDS);
  const perRunnerPerMinute = ((withRunners - alone) / RUNNERS) * (60 / IDLE_SECONDS);
  console.log(
    `idle: API CPU ${ms(alone)} in ${IDLE_SECONDS} s alone, ${ms(withRunners)} with ${RUNNERS} idle runners = ${ms(perRunnerPerMinute)} per idle runner per minute`,
  );
  report({
    measure: `API CPU per idle runner (long-polling claims, ${RUNNERS} runners)`,
    figure: `${perRunnerPerMinute.toFixed(1)} ms/min`,
    floor: `${((alone / IDLE_SECONDS) * 60).toFixed(1)} ms/min (the API with no runner)`,
    ratio: null,
    target: "reported (no target: the cost of a waiting claim)",
    met: true,
  });

  // 2. Claim latency.
  const queued = await wsp(["deploy", appDir, "--api", base, "--token", OWNER_TOKEN, "--no-wait"]);
  const firstId = /(dpl_[0-9a-z]+)/.exec(queued)?.[1];
  if (!firstId) throw new Error(`wsp deploy printed no deployment id: ${queued}`);
  const { projectId } = await call<{ projectId: string }>(base, `/api/deployments/${firstId}`);
  const latencies = await claimLatencies(base, OWNER_TOKEN, projectId, firstId, runners, CLAIMS);
  for (const r of runners) r.stop();
  console.log(
    `claim latency (queued → a runner holds the job), ${CLAIMS} claims: p50 ${ms(median(latencies))}, p99 ${ms(pct(latencies, 0.99))}, max ${ms(Math.max(...latencies))}`,
  );
  report({
    measure: `claim latency p99 (queued → claimed, ${RUNNERS} idle runners, Postgres)`,
    figure: ms(pct(latencies, 0.99)),
    floor: null,
    ratio: null,
    target: "≤ 1 s",
    met: pct(latencies, 0.99) <= 1000,
  });

  // 3. Forwarding: a real runner with an edge port serves the app; requests come through the API's edge.
  const edgePort = 30_000 + Math.floor(Math.random() * 20_000);
  const host = await call<{ id: string; token: string }>(base, "/api/servers", { json: { name: "edge", publicUrl: `http://127.0.0.1:${edgePort}` } });
  const workDir = mkdtempSync(join(tmpdir(), "bench-runners-work-"));
  dirs.push(workDir);
  const runner = spawn(process.execPath, [WSP, "runner", "--api", base, "--work-dir", workDir, "--edge-port", String(edgePort)], {
    env: { PATH: process.env.PATH, HOME: workDir, WORKSPACE_RUNNER_TOKEN: host.token, SMOKE_WINDOW: "0s", STOP_GRACE: "1s", OUTBOUND_ALLOW_PRIVATE: "true" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  children.add(runner);
  // The idle servers' runners are gone (offline after a minute, not yet): the deploy names this one.
  const next = await call<{ id: string }>(base, "/api/deployments", { json: { projectId, serverId: host.id } });
  const end = await follow({
    url: `${base}/api/deployments/${next.id}/logs/stream`,
    token: () => OWNER_TOKEN,
    onLine: () => {},
    signal: AbortSignal.timeout(180_000),
  });
  if (end?.status !== "ready") throw new Error(`the app did not deploy on the edge server: ${end?.status} ${end?.failureReason ?? ""}`);
  const readyId = next.id;
  const project = await call<{ routes: { free: { hostname: string } } }>(base, `/api/projects/${projectId}`);
  const appPort = await portOf(db.url, readyId);
  if (!appPort) throw new Error("the deployment has no port");
  // The same app answers both ways (not a page of the API's own), once the edges learned the new route.
  const { body: appBody } = await httpGet(`http://127.0.0.1:${appPort}/`);
  const hostname = project.routes.free.hostname;
  for (let tries = 0; (await httpGet(`${base}/`, hostname)).body !== appBody; tries++) {
    if (tries === 100) throw new Error(`${hostname} through the API's edge does not reach the app`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const r = await latencyRounds({ forwarded: { url: `${base}/`, host: hostname }, direct: { url: `http://127.0.0.1:${appPort}/` } }, REQUESTS, appBody);
  const [f50, f99, d50, d99] = [r.forwarded!.p50, r.forwarded!.p99, r.direct!.p50, r.direct!.p99];
  console.log(
    `forwarding, ${REQUESTS} sequential GETs, median of 3 rounds: API edge → server edge → app p50 ${ms(f50)} p99 ${ms(f99)}; the app directly p50 ${ms(d50)} p99 ${ms(d99)}; added p50 +${ms(f50 - d50)}`,
  );
  report({
    measure: "forwarding: API edge → server's edge → app, p50 (sequential GETs)",
    figure: ms(f50),
    floor: `${ms(d50)} (the app directly)`,
    ratio: f50 / d50,
    target: "reported (no target: the hops a forwarded request takes)",
    met: true,
  });
}

async function cleanup() {
  for (const c of children) await stopChild(c).catch(() => {});
  if (api) await stopChild(api).catch(() => {});
  await db?.drop().catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}

main()
  .then(cleanup)
  .catch(async (e) => {
    console.error(e);
    await cleanup();
    process.exit(1);
  });
