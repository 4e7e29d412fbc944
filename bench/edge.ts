/**
 * `npm run bench:edge`: what the self-hosted edge adds in front of an app.
 *
 * 1. Creates a fresh Postgres database (test/support/fresh-database.ts, on
 *    BENCH_DATABASE_URL's server, default postgres://postgres@127.0.0.1:5432/test).
 * 2. Starts the app: a tiny node:http server in its own child process answering
 *    a small JSON body (the app's cost is the floor).
 * 3. Starts the edge: the real self-hosted server (bench/edge-server.ts, compiled
 *    as `npm start` compiles the server (functions/node-bundle.mjs) into dist/bench/:
 *    startSelfHosted + loadNodeConfig, RUNNER=off, LOG_LEVEL=silent,
 *    SHARED_DOMAIN=apps.test) in its own child process, so the load generator,
 *    the edge and the app do not share an event loop.
 * 4. Seeds two projects with a current `ready` deployment on the app's port:
 *    `plain` (no route rules) and `ruled` (10 enabled rules, each with a path that
 *    matches the benchmarked path and none refusing: 4 bans and 3 allow-deny deny
 *    rules on other blocks, 3 rate limits far above the load), then waits until
 *    `Host: <slug>.apps.test` is answered by the app through the edge (the route
 *    table reloads on the database's notifications).
 * 5. Loads each case with autocannon (the same load generator for all four):
 *    a warm-up of BENCH_WARMUP_SECONDS (default 2), then BENCH_SECONDS (default 10)
 *    measured, BENCH_CONNECTIONS (default 32) keep-alive connections: the app
 *    directly, through the edge without rules, through the edge with 10 rules,
 *    and through the floor: a bare node:http keep-alive proxy piping both ways
 *    in its own process, what any Node proxy in front of the app costs on this
 *    machine before the edge's own work.
 *    Latencies are taken per response at autocannon's hrtime precision (its own
 *    histogram rounds to whole milliseconds). BENCH_ROUNDS (default 3, at most 30) repeats the
 *    measured runs, rotating the order, to even out background load; with several rounds
 *    each edge case is also compared with the floor of its own round, and the median of
 *    those per-round ratios printed: on a shared machine, the background load moves the
 *    absolute figures between rounds far more than the ratio within one (many short rounds,
 *    e.g. BENCH_ROUNDS=15 BENCH_SECONDS=3, make that median steadier).
 * 6. Prints req/s, p50, p99 per case, each edge case's throughput ratio to the
 *    floor proxy (target ≥ 0.9) and p99 added over it (target ≤ 1 ms), the same
 *    against the app hit directly (for reference), plus CPU per request of each
 *    process and how busy the machine was.
 *
 * Every request through the edge is logged as a `request` line by the server's
 * batching writer, as in production: that is part of the edge's cost, kept.
 * Exit code 0 whatever the figures; non-zero on errors, including any failed or
 * non-2xx request during the load.
 *
 * BENCH_CPU_PROF=<dir> starts the edge child and the floor proxy with `--cpu-prof --cpu-prof-dir=<dir>`
 * (written when it exits; open in Chrome DevTools). BENCH_EDGE_SERVER=<file> starts
 * that file instead of bench/edge-server.ts (same environment and IPC protocol), to
 * measure a variant of the server against the same app in the same way.
 * BENCH_BASELINE_SERVER=<file> starts that server file too, as a second edge on the same database
 * and app, and adds its two cases (`plain-base`, `ruled-base`) to every round: a before/after
 * comparison in one run, each round's two edges measured under the same background load (e.g. a
 * copy of bench/edge-server.ts in a worktree of the previous commit; its file name must differ
 * from edge-server.ts, the compiled entries share dist/bench/).
 * BENCH_CASES=<list> measures only those of direct, plain, ruled, floor (e.g. `plain`
 * with BENCH_CPU_PROF for a profile of the edge's own hot path); the ratios print
 * only when their two cases ran.
 * BENCH_RATE=<req/s> paces every case at that many requests per second in total
 * (autocannon's overallRate; default: as fast as the 32 connections go). At full
 * speed the slowest process saturates and latency is mostly queueing (32
 * connections / throughput); a rate every case can sustain shows the latency the
 * edge adds when it is not the bottleneck.
 */
import autocannon, { type Options, type Result } from "autocannon";
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { count, eq, sql, sum } from "drizzle-orm";
import { openPostgres, type PostgresDatabase } from "../shared/db/postgres";
import {
  deployments,
  environments,
  organizations,
  projects,
  requestLogBatches,
  type RouteRuleConfig,
  type RouteRuleKind,
  routeRules,
} from "../shared/db/schema";
import { newId } from "../shared/ids";
import { freshDatabase, type FreshDatabase } from "../test/support/fresh-database";
import { ADMIN_URL, ask, compiledEntry, intEnv, report, stopChild, thousands, waitForMessage } from "./common";

/** Against the floor proxy (issue: throughput ≥ 0.9x the bare proxy's, added p99 ≤ 1 ms over it). */
const TARGET_RATIO = 0.9;
const TARGET_ADDED_P99_MS = 1;
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "..");
const SHARED_DOMAIN = "apps.test";
const OWNER_TOKEN = "bench-edge-owner-token-0123456789abcdef0123";
const PATH = "/api/items";

const SECONDS = intEnv("BENCH_SECONDS", 10, 1, 600);
const WARMUP_SECONDS = intEnv("BENCH_WARMUP_SECONDS", 2, 0, 60);
const CONNECTIONS = intEnv("BENCH_CONNECTIONS", 32, 1, 1000);
const ROUNDS = intEnv("BENCH_ROUNDS", 3, 1, 30);
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : undefined;
const RATE = intEnv("BENCH_RATE", 0, 0, 1_000_000);
const CASES = new Set((process.env.BENCH_CASES || "direct,plain,ruled,floor").split(",").map((c) => c.trim()));
const EDGE_SERVER = resolve(process.env.BENCH_EDGE_SERVER || join(HERE, "edge-server.ts"));
const BASELINE_SERVER = process.env.BENCH_BASELINE_SERVER ? resolve(process.env.BENCH_BASELINE_SERVER) : undefined;
if (BASELINE_SERVER) CASES.add("plain-base").add("ruled-base");
const READY_TIMEOUT_MS = 30_000;
const ROUTE_TIMEOUT_MS = 10_000;
const WATCHDOG_MS = 120_000 + 3 * ROUNDS * (SECONDS + WARMUP_SECONDS) * 1000;

const log = (line: string) => console.log(line);

// ---------------------------------------------------------------- child processes

/** The app: a bare node:http server answering a small JSON body; reports its port and CPU over IPC. */
const APP = `
const http = require("node:http");
const body = JSON.stringify({ ok: true, app: "bench-edge", items: [1, 2, 3] });
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
});
server.keepAliveTimeout = 65000;
let since = process.cpuUsage();
process.on("message", (m) => {
  if (m && m.type === "reset") { since = process.cpuUsage(); process.send({ type: "reset-done" }); }
  else if (m && m.type === "stats") { const c = process.cpuUsage(since); process.send({ type: "stats", cpuMs: (c.user + c.system) / 1000 }); }
});
process.on("disconnect", () => process.exit(0));
server.listen(0, "127.0.0.1", () => process.send({ type: "ready", port: server.address().port }));
`;

/** The floor: a bare node:http proxy in and out, keep-alive upstream, bodies piped, nothing else. */
const FLOOR = `
const http = require("node:http");
const agent = new http.Agent({ keepAlive: true });
const upstreamPort = Number(process.env.BENCH_APP_PORT);
const server = http.createServer((req, res) => {
  const up = http.request({ host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  up.on("error", () => { if (!res.headersSent) res.writeHead(502); res.end(); });
  req.pipe(up);
});
const { performance } = require("node:perf_hooks");
let since = process.cpuUsage(), elu = performance.eventLoopUtilization();
process.on("message", (m) => {
  if (m && m.type === "reset") { since = process.cpuUsage(); elu = performance.eventLoopUtilization(); process.send({ type: "reset-done" }); }
  else if (m && m.type === "stats") {
    const c = process.cpuUsage(since);
    process.send({ type: "stats", cpuMs: (c.user + c.system) / 1000, eventLoopUtilization: performance.eventLoopUtilization(elu).utilization });
  }
});
process.on("disconnect", () => process.exit(0));
// An orderly exit, so --cpu-prof (BENCH_CPU_PROF) writes its profile.
process.on("SIGTERM", () => process.exit(0));
server.listen(0, "127.0.0.1", () => process.send({ type: "ready", port: server.address().port }));
`;

// ---------------------------------------------------------------- seeding

interface Seeded {
  orgId: string;
  plain: { projectId: string; slug: string };
  ruled: { projectId: string; slug: string };
}

/** Ten rules, none refusing 127.0.0.1, each with a path that matches PATH (prefixes and globs). */
const RULES: Array<{ kind: RouteRuleKind; path: string | null; config: RouteRuleConfig }> = [
  { kind: "ban", path: null, config: { cidr: "203.0.113.0/24", expiresAt: null, reason: "bench" } },
  { kind: "ban", path: "/api", config: { cidr: "198.51.100.7/32", expiresAt: null, reason: "bench" } },
  { kind: "ban", path: "/api/**", config: { cidr: "2001:db8::/32", expiresAt: null, reason: "bench" } },
  { kind: "ban", path: "/api/*", config: { cidr: "192.0.2.0/24", expiresAt: new Date(Date.now() + 86_400_000).toISOString(), reason: null } },
  { kind: "allow-deny", path: "/", config: { mode: "deny", cidrs: ["10.0.0.0/8", "172.16.0.0/12"] } },
  { kind: "allow-deny", path: "/api/items", config: { mode: "deny", cidrs: ["100.64.0.0/10", "fd00::/8"] } },
  { kind: "allow-deny", path: "/**/items", config: { mode: "deny", cidrs: ["192.168.0.0/16"] } },
  { kind: "rate-limit", path: null, config: { limit: 1_000_000, windowSeconds: 60, by: "ip" } },
  { kind: "rate-limit", path: "/api", config: { limit: 1_000_000, windowSeconds: 60, by: "ip" } },
  // Windows of a minute: the largest limit (1,000,000) must stay above what one address sends in a window
  // across rounds (a ruled case runs ~10 s in every ~40 s; at 25,000 req/s an hour's window ran out by round 5).
  { kind: "rate-limit", path: "/api/*", config: { limit: 1_000_000, windowSeconds: 60, by: "ip" } },
];

async function seed(database: PostgresDatabase, appPort: number): Promise<Seeded> {
  const { db } = database;
  const orgId = newId("org");
  await db.insert(organizations).values({ id: orgId, name: "Edge bench" });
  const project = async (slug: string, withRules: boolean) => {
    const projectId = newId("prj");
    const environmentId = newId("env");
    await db.transaction(async (tx) => {
      await tx.insert(projects).values({ id: projectId, orgId, name: slug, slug, sleepMode: "always_on" });
      await tx.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
      await tx.insert(deployments).values({
        id: newId("dpl"),
        orgId,
        projectId,
        environmentId,
        status: "ready",
        current: true,
        port: appPort,
        servedBy: "bench",
        source: "git",
      });
      if (withRules) {
        // One at a time: ids (creation order) increase, as the API would create them.
        for (const r of RULES) await tx.insert(routeRules).values({ id: newId("rr"), orgId, projectId, enabled: true, ...r });
      }
    });
    return { projectId, slug };
  };
  const plain = await project("bench-plain", false);
  const ruled = await project("bench-ruled", true);
  return { orgId, plain, ruled };
}

// ---------------------------------------------------------------- load

interface Target {
  key: "direct" | "plain" | "ruled" | "floor" | "plain-base" | "ruled-base";
  name: string;
  url: string;
  headers: Record<string, string>;
}

/** GETs the target until the app's body comes back (the edge's table may not have the route yet). */
async function untilServed(t: Target, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    try {
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        // node:http, not fetch: fetch does not let a request set its Host header.
        import("node:http").then(({ request }) => {
          const req = request(t.url, { headers: t.headers, timeout: 5_000 }, (r) => {
            let body = "";
            r.setEncoding("utf8");
            r.on("data", (c) => (body += c));
            r.on("end", () => resolve({ status: r.statusCode ?? 0, body }));
          });
          req.on("error", reject);
          req.on("timeout", () => req.destroy(new Error("timeout")));
          req.end();
        }, reject);
      });
      if (res.status === 200 && (JSON.parse(res.body) as { app?: string }).app === "bench-edge") return;
      last = `${res.status} ${res.body.slice(0, 200)}`;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${t.name}: not answered by the app within ${timeoutMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let running: ReturnType<typeof autocannon> | undefined;

interface Run {
  result: Result;
  seconds: number;
  latencies: number[];
}

async function load(t: Target, seconds: number, record: boolean): Promise<Run> {
  const latencies: number[] = [];
  const started = performance.now();
  const options: Options & { overallRate?: number } = {
    url: t.url,
    headers: t.headers,
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 10,
    title: t.name,
  };
  if (RATE > 0) options.overallRate = RATE;
  running = autocannon(options);
  if (record) {
    // autocannon's own histogram keeps whole milliseconds; the event carries the hrtime duration.
    (running as unknown as NodeJS.EventEmitter).on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latencies.push(ms);
    });
  }
  try {
    const result = await running;
    if (result.errors || result.non2xx || result.timeouts || result["2xx"] === 0) {
      throw new Error(`${t.name}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx of ${result.requests.total} requests`);
    }
    return { result, seconds: (performance.now() - started) / 1000, latencies };
  } finally {
    running = undefined;
  }
}

/** Busy fraction of the whole machine (all cores) between two os.cpus() readings. */
function machineBusy(before: ReturnType<typeof cpus>, after: ReturnType<typeof cpus>): number {
  let busy = 0;
  let total = 0;
  after.forEach((c, i) => {
    const b = before[i]!.times;
    const d = { user: c.times.user - b.user, nice: c.times.nice - b.nice, sys: c.times.sys - b.sys, idle: c.times.idle - b.idle, irq: c.times.irq - b.irq };
    busy += d.user + d.nice + d.sys + d.irq;
    total += d.user + d.nice + d.sys + d.irq + d.idle;
  });
  return total ? busy / total : 0;
}

interface Measured {
  requests: number;
  seconds: number;
  latencies: number[];
  edgeCpuMs: number;
  edgeElu: number;
  appCpuMs: number;
  loadCpuMs: number;
  machineBusy: number;
}

/** `edge` is the process in front of the app (the edge server, or the floor proxy). */
async function measure(t: Target, edge: ChildProcess, app: ChildProcess): Promise<Measured> {
  await ask(edge, "reset", "reset-done", "edge server");
  await ask(app, "reset", "reset-done", "app");
  const cpuBefore = cpus();
  const loadBefore = process.cpuUsage();
  const run = await load(t, SECONDS, true);
  const loadCpu = process.cpuUsage(loadBefore);
  const busy = machineBusy(cpuBefore, cpus());
  const edgeStats = await ask<{ cpuMs: number; eventLoopUtilization: number }>(edge, "stats", "stats", "edge server");
  const appStats = await ask<{ cpuMs: number }>(app, "stats", "stats", "app");
  return {
    requests: run.latencies.length,
    seconds: run.seconds,
    latencies: run.latencies,
    edgeCpuMs: edgeStats.cpuMs,
    edgeElu: edgeStats.eventLoopUtilization,
    appCpuMs: appStats.cpuMs,
    loadCpuMs: (loadCpu.user + loadCpu.system) / 1000,
    machineBusy: busy,
  };
}

interface Summary {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  edgeUsPerReq: number;
  appUsPerReq: number;
  loadUsPerReq: number;
  edgeElu: number;
  machineBusy: number;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const percentile = (sorted: Float64Array, p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

/** Rounds pooled: req/s as the mean of the rounds, percentiles over every latency of every round. */
function summarize(name: string, runs: Measured[]): Summary {
  const all = Float64Array.from(runs.flatMap((r) => r.latencies)).sort();
  const requests = runs.reduce((a, r) => a + r.requests, 0) || 1;
  const perReq = (f: (r: Measured) => number) => (runs.reduce((a, r) => a + f(r), 0) * 1000) / requests;
  return {
    name,
    rps: mean(runs.map((r) => r.requests / r.seconds)),
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    requests,
    edgeUsPerReq: perReq((r) => r.edgeCpuMs),
    appUsPerReq: perReq((r) => r.appCpuMs),
    loadUsPerReq: perReq((r) => r.loadCpuMs),
    edgeElu: mean(runs.map((r) => r.edgeElu)),
    machineBusy: mean(runs.map((r) => r.machineBusy)),
  };
}

function line(s: Summary, prefix = ""): string {
  const detail = [
    `CPU µs/req: edge ${s.edgeUsPerReq.toFixed(0)}, app ${s.appUsPerReq.toFixed(0)}, load generator ${s.loadUsPerReq.toFixed(0)}`,
    `edge event loop ${(s.edgeElu * 100).toFixed(0)}% busy`,
    `machine ${(s.machineBusy * 100).toFixed(0)}% busy`,
  ].join("; ");
  return `${prefix}${s.name.padEnd(24)} ${s.rps.toFixed(0).padStart(7)} req/s   p50 ${s.p50.toFixed(2).padStart(6)} ms   p99 ${s.p99.toFixed(2).padStart(6)} ms   (${detail})`;
}

// ---------------------------------------------------------------- main

let db: FreshDatabase | undefined;
let database: PostgresDatabase | undefined;
let dataDir: string | undefined;
let appChild: ChildProcess | undefined;
let edgeChild: ChildProcess | undefined;
let baselineChild: ChildProcess | undefined;
let floorChild: ChildProcess | undefined;
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    running?.stop();
    await Promise.allSettled([edgeChild, baselineChild, floorChild, appChild].filter((c): c is ChildProcess => !!c).map(stopChild));
    await database?.close().catch(() => {});
    if (db) await db.drop().catch((e) => console.error("bench: dropping the database failed:", e));
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  })();
  return cleaning;
}

async function main(): Promise<void> {
  db = await freshDatabase(ADMIN_URL, "bench_edge", { migrate: true });
  dataDir = mkdtempSync(join(tmpdir(), "bench-edge-"));

  appChild = spawn(process.execPath, ["-e", APP], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const { port: appPort } = await waitForMessage<{ port: number }>(appChild, "ready", READY_TIMEOUT_MS, "app");

  const profArgs = CPU_PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF_DIR}`] : [];
  edgeChild = spawn(process.execPath, [...profArgs, await compiledEntry(EDGE_SERVER)], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, BENCH_DB_URL: db.url, BENCH_DATA_DIR: dataDir, BENCH_OWNER_TOKEN: OWNER_TOKEN },
  });
  const { url: edgeUrl } = await waitForMessage<{ url: string }>(edgeChild, "ready", READY_TIMEOUT_MS, "edge server");
  let baselineUrl: string | undefined;
  if (BASELINE_SERVER) {
    const baselineDir = mkdtempSync(join(tmpdir(), "bench-edge-base-"));
    // The same secret keys (DATA_DIR/secret-keys): the database's secrets were encrypted with them.
    cpSync(dataDir, baselineDir, { recursive: true });
    baselineChild = spawn(process.execPath, [await compiledEntry(BASELINE_SERVER)], {
      cwd: ROOT,
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      env: { ...process.env, BENCH_DB_URL: db.url, BENCH_DATA_DIR: baselineDir, BENCH_OWNER_TOKEN: OWNER_TOKEN },
    });
    baselineChild.once("exit", () => rmSync(baselineDir, { recursive: true, force: true }));
    ({ url: baselineUrl } = await waitForMessage<{ url: string }>(baselineChild, "ready", READY_TIMEOUT_MS, "baseline edge server"));
  }

  // Seeded after the server started: its route table learns the projects from the database's notifications.
  database = await openPostgres(db.url, { migrate: false, max: 2 });
  const seeded = await seed(database, appPort);

  const targets: Target[] = [
    { key: "direct", name: "direct (app)", url: `http://127.0.0.1:${appPort}${PATH}`, headers: {} },
    { key: "plain", name: "edge, no rules", url: `${edgeUrl}${PATH}`, headers: { host: `${seeded.plain.slug}.${SHARED_DOMAIN}` } },
    { key: "ruled", name: "edge, 10 rules", url: `${edgeUrl}${PATH}`, headers: { host: `${seeded.ruled.slug}.${SHARED_DOMAIN}` } },
  ];
  if (baselineUrl) {
    targets.push(
      { key: "plain-base", name: "baseline, no rules", url: `${baselineUrl}${PATH}`, headers: { host: `${seeded.plain.slug}.${SHARED_DOMAIN}` } },
      { key: "ruled-base", name: "baseline, 10 rules", url: `${baselineUrl}${PATH}`, headers: { host: `${seeded.ruled.slug}.${SHARED_DOMAIN}` } },
    );
  }
  floorChild = spawn(process.execPath, [...profArgs, "-e", FLOOR], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, BENCH_APP_PORT: String(appPort) },
  });
  const { port: floorPort } = await waitForMessage<{ port: number }>(floorChild, "ready", READY_TIMEOUT_MS, "floor proxy");
  targets.push({ key: "floor", name: "bare node proxy (floor)", url: `http://127.0.0.1:${floorPort}${PATH}`, headers: {} });
  for (const t of targets) await untilServed(t, ROUTE_TIMEOUT_MS);

  log(
    `bench: database ${new URL(db.url).pathname.slice(1)}, node ${process.version}, ${cpus().length} cores, ${CONNECTIONS} connections, ` +
      `GET ${PATH}${RATE > 0 ? ` at ${RATE} req/s` : ""}, ${WARMUP_SECONDS} s warm-up + ${ROUNDS > 1 ? `${ROUNDS} x ` : ""}${SECONDS} s measured per case`,
  );
  const measured = targets.filter((t) => CASES.has(t.key));
  if (WARMUP_SECONDS > 0) for (const t of measured) await load(t, WARMUP_SECONDS, false);

  const runs: Record<Target["key"], Measured[]> = { direct: [], plain: [], ruled: [], floor: [], "plain-base": [], "ruled-base": [] };
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate the order so no case always runs first (or last) under the same background load.
    const order = measured.map((_, i) => measured[(i + round) % measured.length]!);
    for (const t of order) {
      const front = t.key === "floor" ? floorChild! : t.key.endsWith("-base") ? baselineChild! : edgeChild;
      const m = await measure(t, front, appChild);
      runs[t.key].push(m);
      if (ROUNDS > 1) log(line(summarize(t.name, [m]), `round ${round + 1}/${ROUNDS}  `));
    }
  }

  const summaryOf = (key: Target["key"]) => (runs[key].length ? summarize(targets.find((t) => t.key === key)!.name, runs[key]) : undefined);
  const direct = summaryOf("direct");
  const plain = summaryOf("plain");
  const ruled = summaryOf("ruled");
  const floor = summaryOf("floor");
  if (ROUNDS > 1) log(`over ${ROUNDS} rounds: mean req/s, percentiles over all rounds' requests`);
  for (const s of [direct, plain, ruled, floor, summaryOf("plain-base"), summaryOf("ruled-base")]) if (s) log(line(s));

  // Every proxied request is a request line (the batching writer flushes within a moment).
  await new Promise((r) => setTimeout(r, 1_000));
  const [stored] = await database.db
    .select({ n: sum(sql`${requestLogBatches.lastSeq} - ${requestLogBatches.firstSeq} + 1`).mapWith(Number), batches: count() })
    .from(requestLogBatches)
    .where(eq(requestLogBatches.orgId, seeded.orgId));
  log(`server log: ${stored?.n ?? 0} request lines stored, in ${stored?.batches ?? 0} batches`);

  let allMet = true;
  const signed = (ms: number) => `${ms >= 0 ? "+" : ""}${ms.toFixed(2)} ms`;
  if (!direct || !floor) {
    log("targets: not judged (BENCH_CASES left out the app or the floor proxy)");
    return;
  }
  for (const s of [plain, ruled]) {
    if (!s) continue;
    const ratio = s.rps / floor.rps;
    const added = s.p99 - floor.p99;
    const met = Number(ratio.toFixed(2)) >= TARGET_RATIO && Number(added.toFixed(2)) <= TARGET_ADDED_P99_MS;
    allMet &&= met;
    report({
      measure: `edge throughput, ${s === plain ? "no rules" : "10 route rules"} (p99 ${s.p99.toFixed(2)} ms)`,
      figure: `${thousands(s.rps)} req/s`,
      floor: `${thousands(floor.rps)} req/s, p99 ${floor.p99.toFixed(2)} ms (bare node proxy)`,
      ratio,
      target: `≥ ${TARGET_RATIO}x, p99 ≤ +${TARGET_ADDED_P99_MS} ms`,
      met,
    });
    log(
      `${s.name.padEnd(24)} vs the floor proxy: ratio ${ratio.toFixed(2)}x (target >= ${TARGET_RATIO}), added p99 ${signed(added)} ` +
        `(target <= ${TARGET_ADDED_P99_MS} ms): ${met ? "met" : "missed"}; vs the app directly: ${(s.rps / direct.rps).toFixed(2)}x, ${signed(s.p99 - direct.p99)}`,
    );
  }
  log(`${floor.name.padEnd(24)} vs the app directly: ${(floor.rps / direct.rps).toFixed(2)}x, added p99 ${signed(floor.p99 - direct.p99)}`);
  if (ROUNDS > 1) {
    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    for (const [key, base] of [
      ["plain", "plain-base"],
      ["ruled", "ruled-base"],
    ] as const) {
      if (!runs[base].length || runs[base].length !== runs[key].length) continue;
      const per = runs[key].map((m, i) => summarize("", [m]).rps / summarize("", [runs[base][i]!]).rps);
      log(
        `${targets.find((t) => t.key === key)!.name.padEnd(24)} per round vs the baseline's: throughput ratio median ${median(per).toFixed(2)}x (${per.map((r) => r.toFixed(2)).join(", ")})`,
      );
    }
    for (const key of ["plain", "ruled", "plain-base", "ruled-base"] as const) {
      if (runs[key].length !== runs.floor.length) continue;
      const per = runs[key].map((m, i) => {
        const a = summarize("", [m]);
        const f = summarize("", [runs.floor[i]!]);
        return { ratio: a.rps / f.rps, added: a.p99 - f.p99 };
      });
      log(
        `${targets.find((t) => t.key === key)!.name.padEnd(24)} per round vs that round's floor: ratio median ${median(per.map((p) => p.ratio)).toFixed(2)}x ` +
          `(${per.map((p) => p.ratio.toFixed(2)).join(", ")}), added p99 median ${signed(median(per.map((p) => p.added)))} (${per.map((p) => p.added.toFixed(1)).join(", ")})`,
      );
    }
  }
  log(`targets: ${allMet ? "met" : "missed"}`);
}

const watchdog = setTimeout(() => {
  console.error(`bench: still running after ${WATCHDOG_MS / 1000} s; giving up`);
  void cleanup().finally(() => process.exit(1));
}, WATCHDOG_MS);
watchdog.unref();

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`bench: ${signal}, cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

let code = 0;
try {
  await main();
} catch (e) {
  console.error("bench failed:", e instanceof Error ? (e.stack ?? e.message) : e);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
