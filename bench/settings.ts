/**
 * `npm run bench`: throughput of the authenticated `GET /api/settings` of the real
 * app against a bare Hono route doing one comparable select, on the same Postgres.
 *
 * 1. Creates a fresh database `bench_<time>_<pid>` on BENCH_DATABASE_URL's server
 *    (default postgres://postgres@127.0.0.1:5432/test, used as the admin
 *    connection), migrates it, and seeds one user, organization, token and
 *    settings row.
 * 2. Starts bench/server.ts in a child process, compiled as `npm start` compiles
 *    the server (bench/common.ts compiledEntry; real app and bare app on two
 *    ports, each with a pg Pool of BENCH_POOL_MAX connections).
 * 3. Checks that both answer 200, then loads each with autocannon: a warm-up of
 *    BENCH_WARMUP_SECONDS (default 2), then BENCH_SECONDS (default 3) measured,
 *    BENCH_CONNECTIONS (default 10) connections. BENCH_ROUNDS (default 10) repeats
 *    the measured runs, alternating which app goes first, to even out background
 *    load; the summary then gives the mean req/s and the median p99 of the rounds, and the
 *    ratios judged are the medians of the rounds' own ratios (each round's two apps ran
 *    back to back, under the same background load). Many short rounds rather than a few
 *    long ones: on a shared machine the background load drifts over tens of seconds, and
 *    the closer in time the two apps' runs, the less of that drift a round's ratio carries.
 *    With `taskset` and two CPUs or more, the server runs on the last CPU and this process
 *    (the load generator) on the others, so the two never take turns on one core
 *    (BENCH_PIN=off: no pinning).
 * 4. Prints requests/s and p99 for both, `ratio X.XX` (real/bare throughput) and
 *    whether the targets (>= 0.90 throughput, <= 1.15x CPU per request) are met; stops the child and drops the database,
 *    also on failure or Ctrl-C.
 *
 * Exit code 0 whatever the ratio (it is a measurement); non-zero on errors,
 * including any failed or non-2xx request during the load.
 *
 * 5. Profiles each app alone for BENCH_PROFILE_SECONDS (default 3; 0: not) of load
 *    and prints the real route's top frames by self time, and the frames it spends
 *    more on per request than the bare route (bench/profile-frames.ts).
 *
 * BENCH_CPU_PROF=<dir> starts the child with `--cpu-prof --cpu-prof-dir=<dir>`: the
 * profile (both apps, written when the child exits) opens in Chrome DevTools.
 */
import autocannon, { type Result } from "autocannon";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createOrganization, createUser, issueToken } from "../functions/identity/store";
import { writeSettings } from "../functions/settings/store";
import { openPostgres } from "../shared/db/postgres";
import { extraFrames, type Frame } from "./profile-frames";
import { admin, ADMIN_URL, ask, compiledEntry, intEnv, report, stopChild, thousands, waitForMessage } from "./common";

/** Issue 25: throughput ≥ 0.9x the bare route's, server CPU per request ≤ 1.15x. */
const TARGET = 0.9;
const TARGET_CPU = 1.15;
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "..");

const SECONDS = intEnv("BENCH_SECONDS", 3, 1, 600);
const WARMUP_SECONDS = intEnv("BENCH_WARMUP_SECONDS", 2, 0, 60);
const CONNECTIONS = intEnv("BENCH_CONNECTIONS", 10, 1, 1000);
const POOL_MAX = intEnv("BENCH_POOL_MAX", 10, 1, 100);
const ROUNDS = intEnv("BENCH_ROUNDS", 10, 1, 50);
/** Seconds of load of the real route alone under the profiler, whose top frames are printed; 0: none. */
const PROFILE_SECONDS = intEnv("BENCH_PROFILE_SECONDS", 3, 0, 60);
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : undefined;
const READY_TIMEOUT_MS = 30_000;
// Everything (setup, both loads, teardown) must end well within this.
const WATCHDOG_MS = 120_000 + 2 * 2 * (ROUNDS * SECONDS + WARMUP_SECONDS) * 1000;

const log = (line: string) => console.log(line);

// ---------------------------------------------------------------- database

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

interface Seed {
  orgId: string;
  userId: string;
  token: string;
}

async function seed(url: string): Promise<Seed> {
  const database = await openPostgres(url, { max: 2 }); // migrates
  try {
    const seeded = await database.db.transaction(async (tx) => {
      const user = await createUser(tx, { email: "bench@localhost", name: "Bench" });
      const org = await createOrganization(tx, "Bench organization", user.id);
      const { token } = await issueToken(tx, { userId: user.id, name: "bench", scopes: null, expiresAt: null });
      return { orgId: org.id, userId: user.id, token };
    });
    // A stored row, so both routes read (and serialize) a real row rather than defaults.
    await writeSettings(database.db, { orgId: seeded.orgId, userId: seeded.userId }, { buildMode: "server" }, new Date());
    return seeded;
  } finally {
    await database.close();
  }
}

// ---------------------------------------------------------------- child process

interface ChildStats {
  real: { queries: number; queryMs: number };
  bare: { queries: number; queryMs: number };
  wallMs: number;
  cpuMs: number;
  userMs: number;
  eventLoopUtilization: number;
}

/**
 * The CPUs of the server and of this process (the load generator), when they can be kept apart: `taskset`
 * present, two CPUs or more, BENCH_PIN not `off`. Postgres is left to the scheduler.
 */
function pinning(): { server: string; load: string } | undefined {
  const cpus = availableParallelism();
  if (process.env.BENCH_PIN === "off" || process.platform !== "linux" || cpus < 2) return undefined;
  if (spawnSync("taskset", ["-cp", `0-${cpus - 2}`, String(process.pid)], { stdio: "ignore" }).status !== 0) return undefined;
  return { server: String(cpus - 1), load: cpus === 2 ? "0" : `0-${cpus - 2}` };
}

async function startServer(url: string, s: Seed, pin: { server: string } | undefined): Promise<ChildProcess> {
  const profArgs = CPU_PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF_DIR}`] : [];
  const command = [process.execPath, ...profArgs, await compiledEntry(join(HERE, "server.ts"))];
  if (pin) command.unshift("taskset", "-c", pin.server);
  return spawn(command[0]!, command.slice(1), {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: {
      ...process.env,
      BENCH_DB_URL: url,
      BENCH_ORG_ID: s.orgId,
      BENCH_USER_ID: s.userId,
      BENCH_POOL_MAX: String(POOL_MAX),
    },
  });
}

// ---------------------------------------------------------------- load

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
}

async function firstResponse(t: Target, check: (body: unknown) => boolean): Promise<void> {
  const res = await fetch(t.url, { headers: t.headers, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${t.name}: GET ${t.url} answered ${res.status}: ${text.slice(0, 500)}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${t.name}: GET ${t.url} answered non-JSON: ${text.slice(0, 200)}`);
  }
  if (!check(body)) throw new Error(`${t.name}: unexpected body ${text.slice(0, 500)}`);
}

let running: ReturnType<typeof autocannon> | undefined;

async function load(t: Target, seconds: number): Promise<Result> {
  running = autocannon({ url: t.url, headers: t.headers, connections: CONNECTIONS, duration: seconds, timeout: 10, title: t.name });
  try {
    return await running;
  } finally {
    running = undefined;
  }
}

interface Measured {
  target: Target;
  result: Result;
  queries: number;
  queryMs: number;
  cpuMs: number;
  userMs: number;
  elu: number;
}

async function warmUp(t: Target): Promise<void> {
  if (WARMUP_SECONDS === 0) return;
  const warm = await load(t, WARMUP_SECONDS);
  if (warm.errors || warm.non2xx || warm.timeouts) {
    throw new Error(`${t.name}: warm-up had ${warm.errors} errors, ${warm.timeouts} timeouts, ${warm.non2xx} non-2xx`);
  }
}

async function measure(child: ChildProcess, t: Target, key: "real" | "bare"): Promise<Measured> {
  await ask(child, "reset", "reset-done", "bench server");
  const result = await load(t, SECONDS);
  const stats = await ask<ChildStats>(child, "stats", "stats", "bench server");
  if (result.errors || result.non2xx || result.timeouts || result["2xx"] === 0) {
    throw new Error(`${t.name}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx of ${result.requests.total} requests`);
  }
  return {
    target: t,
    result,
    queries: stats[key].queries,
    queryMs: stats[key].queryMs,
    cpuMs: stats.cpuMs,
    userMs: stats.userMs,
    elu: stats.eventLoopUtilization,
  };
}

interface Summary {
  name: string;
  rps: number;
  p99: number;
  meanMs: number;
  requests: number;
  queries: number;
  queryMs: number;
  cpuMs: number;
  userMs: number;
  elu: number;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** One run as is; several rounds as mean req/s, median p99, and per-request figures over all rounds. */
function summarize(runs: Measured[]): Summary {
  const sum = (f: (m: Measured) => number) => runs.reduce((a, m) => a + f(m), 0);
  const requests = sum((m) => m.result.requests.total);
  return {
    name: runs[0]!.target.name,
    rps: mean(runs.map((m) => m.result.requests.average)),
    p99: median(runs.map((m) => m.result.latency.p99)),
    meanMs: sum((m) => m.result.latency.mean * m.result.requests.total) / (requests || 1),
    requests,
    queries: sum((m) => m.queries),
    queryMs: sum((m) => m.queryMs),
    cpuMs: sum((m) => m.cpuMs),
    userMs: sum((m) => m.userMs),
    elu: mean(runs.map((m) => m.elu)),
  };
}

function line(s: Summary, prefix = ""): string {
  const n = s.requests || 1;
  const detail = [
    `mean ${s.meanMs.toFixed(2)} ms`,
    `${(s.queries / n).toFixed(2)} queries/req`,
    `pool.query ${s.queries ? (s.queryMs / s.queries).toFixed(2) : "-"} ms/query`,
    `server CPU ${((s.cpuMs * 1000) / n).toFixed(0)} µs/req (user ${((s.userMs * 1000) / n).toFixed(0)})`,
    `event loop ${(s.elu * 100).toFixed(0)}% busy`,
  ].join(", ");
  return `${prefix}${s.name.padEnd(24)} ${s.rps.toFixed(0).padStart(7)} req/s   p99 ${s.p99.toFixed(2).padStart(6)} ms   (${detail})`;
}

// ---------------------------------------------------------------- main

const dbName = `bench_${Date.now().toString(36)}_${process.pid}`;
let created = false;
let child: ChildProcess | undefined;
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    running?.stop();
    if (child) await stopChild(child).catch((e) => console.error("bench: stopping the server failed:", e));
    if (created) {
      await admin((c) => c.query(`drop database if exists ${quoteIdent(dbName)} with (force)`)).catch((e) =>
        console.error(`bench: dropping database ${dbName} failed:`, e),
      );
    }
  })();
  return cleaning;
}

async function main(): Promise<void> {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${dbName}`;
  const dbUrl = url.toString();

  await admin((c) => c.query(`create database ${quoteIdent(dbName)}`));
  created = true;
  const s = await seed(dbUrl);

  const pin = pinning();
  child = await startServer(dbUrl, s, pin);
  const ready = await waitForMessage<{ realPort: number; barePort: number }>(child, "ready", READY_TIMEOUT_MS, "bench server");

  const real: Target = {
    name: "real GET /api/settings",
    url: `http://127.0.0.1:${ready.realPort}/api/settings`,
    headers: { authorization: `Bearer ${s.token}` },
  };
  const bare: Target = { name: "bare GET /bare", url: `http://127.0.0.1:${ready.barePort}/bare`, headers: {} };
  await firstResponse(real, (b) => (b as { buildMode?: string }).buildMode === "server");
  await firstResponse(bare, (b) => (b as { orgId?: string; buildMode?: string })?.orgId === s.orgId && (b as { buildMode?: string }).buildMode === "server");

  log(
    `bench: database ${dbName}, node ${process.version}, ${CONNECTIONS} connections, ` +
      `${WARMUP_SECONDS} s warm-up + ${ROUNDS > 1 ? `${ROUNDS} x ` : ""}${SECONDS} s measured per app, pg pool max ${POOL_MAX} per app, ` +
      (pin ? `server on CPU ${pin.server}, load generator on CPU ${pin.load}` : "no CPU pinning"),
  );
  await warmUp(real);
  await warmUp(bare);
  const runs = { real: [] as Measured[], bare: [] as Measured[] };
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? (["real", "bare"] as const) : (["bare", "real"] as const);
    for (const key of order) {
      const m = await measure(child, key === "real" ? real : bare, key);
      runs[key].push(m);
      if (ROUNDS > 1) log(line(summarize([m]), `round ${round}/${ROUNDS}  `));
    }
  }
  // Where the real route's time goes: a profile of a load of it alone (after the measured rounds, which it would slow).
  if (PROFILE_SECONDS > 0) {
    const profiled = async (t: Target) => {
      await ask(child!, "profile-start", "profile-started", "bench server");
      const result = await load(t, PROFILE_SECONDS);
      const { frames } = await ask<{ frames: Frame[] }>(child!, "profile-stop", "profile", "bench server");
      return { frames, requests: result.requests.total };
    };
    const r = await profiled(real);
    const b = await profiled(bare);
    log(`CPU profile of the real route (${PROFILE_SECONDS} s of load alone), top frames by self time, idle left out:`);
    for (const f of r.frames.slice(0, 15)) log(`  ${(f.share * 100).toFixed(1).padStart(5)} %  ${f.frame}`);
    log("where the real route spends more than the bare one (µs per request, self time: real / bare):");
    for (const f of extraFrames(r.frames, r.requests, b.frames, b.requests, 15))
      log(`  +${(f.a - f.b).toFixed(1).padStart(5)}  (${f.a.toFixed(1)} / ${f.b.toFixed(1)})  ${f.frame}`);
  }
  const realSummary = summarize(runs.real);
  const bareSummary = summarize(runs.bare);
  if (ROUNDS > 1) log(`over ${ROUNDS} rounds: mean req/s, median p99`);
  log(line(realSummary));
  log(line(bareSummary));

  // Per round, real over bare; the median of those when there are several rounds.
  const roundRatios = (f: (m: Measured) => number) => runs.real.map((m, i) => f(m) / f(runs.bare[i]!));
  const cpuOf = (m: Measured) => m.cpuMs / (m.result.requests.total || 1);
  const ratio = median(roundRatios((m) => m.result.requests.average));
  log(
    `ratio ${ratio.toFixed(3)}${
      ROUNDS > 1
        ? ` (median of the rounds' ${roundRatios((m) => m.result.requests.average)
            .map((r) => r.toFixed(2))
            .join(", ")})`
        : ""
    }`,
  );
  log(`target >= ${TARGET.toFixed(2)}: ${ratio >= TARGET ? "met" : "missed"}`);
  report({
    measure: "GET /api/settings throughput (authenticated)",
    figure: `${thousands(realSummary.rps)} req/s`,
    floor: `${thousands(bareSummary.rps)} req/s (bare route, same query)`,
    ratio,
    target: `≥ ${TARGET.toFixed(2)}x`,
    met: ratio >= TARGET,
  });
  const cpuPerReq = (m: Summary) => (m.cpuMs * 1000) / (m.requests || 1);
  const cpuRatio = median(roundRatios(cpuOf));
  log(`server CPU per request ${cpuRatio.toFixed(3)}x the bare route's (target <= ${TARGET_CPU.toFixed(2)}): ${cpuRatio <= TARGET_CPU ? "met" : "missed"}`);
  report({
    measure: "GET /api/settings server CPU per request",
    figure: `${cpuPerReq(realSummary).toFixed(0)} µs`,
    floor: `${cpuPerReq(bareSummary).toFixed(0)} µs (bare route)`,
    ratio: cpuRatio,
    target: `≤ ${TARGET_CPU.toFixed(2)}x`,
    met: cpuRatio <= TARGET_CPU,
  });
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
