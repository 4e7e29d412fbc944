/**
 * `npm run bench:start`: how long the self-hosted server takes from spawn to its
 * first real answer (not the 503 it gives while starting), on a fresh data
 * directory (initdb) and on an existing one, BENCH_ROUNDS (default 3) times each.
 *
 * Measured, each round in a process of its own:
 * - `npm start`: what an operator runs (npm's own start-up included);
 * - the start script's command without npm (`BENCH_START_CMD` overrides it, e.g.
 *   `tsx functions/node.ts` to measure the former start);
 * - the floor: a bare `node -e` HTTP server, in the same run.
 * Medians are printed with their ratio to the floor. The launcher's build is made
 * fresh first (its time is printed too: what the first start after a code change adds).
 *
 * Exit code 0 whatever the figures (it is a measurement); non-zero on errors.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { intEnv, report } from "./common";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const ROUNDS = intEnv("BENCH_ROUNDS", 3, 1, 50);
const BIN = join(ROOT, "node_modules", ".bin");
const PATH = `${BIN}:${process.env.PATH ?? ""}`;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

interface Run {
  readyMs: number;
  stopMs: number;
}

/** Spawns `argv`, polls until the server answers with anything but 503, then SIGTERMs it and waits for its exit. */
async function timeStart(argv: string[], env: Record<string, string>): Promise<Run> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: ROOT,
    env: { ...process.env, PATH, PORT: String(port), LOG_LEVEL: "silent", DATABASE_URL: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: whatever it leaves behind is killed after the measurement.
    detached: true,
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  let readyMs = 0;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${argv.join(" ")} exited with ${child.exitCode}:\n${output}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/me`, { signal: AbortSignal.timeout(2_000) });
      await res.body?.cancel();
      if (res.status !== 503) {
        readyMs = performance.now() - started;
        break;
      }
    } catch {
      // Not listening yet.
    }
    if (performance.now() - started > 120_000) throw new Error(`${argv.join(" ")} not ready in 120 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  const stopping = performance.now();
  child.kill("SIGTERM");
  const code = await exited;
  const stopMs = performance.now() - stopping;
  const leftServing = await fetch(`http://127.0.0.1:${port}/api/me`).then(
    (res) => {
      res.body?.cancel();
      return true;
    },
    () => false,
  );
  try {
    process.kill(-child.pid!, "SIGKILL");
  } catch {
    // The group is gone: nothing was left behind.
  }
  if (leftServing || code !== 0) console.log(`  ${argv[0]}: exited with ${code} on SIGTERM${leftServing ? ", leaving a process serving" : ""}`);
  return { readyMs, stopMs };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

const script = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts.start!;
const command = process.env.BENCH_START_CMD || script.replace(/^exec\s+/, "");
const targets: Array<{ label: string; argv: string[] }> = [
  { label: "npm start", argv: ["npm", "start", "--silent"] },
  { label: command, argv: ["sh", "-c", `exec ${command}`] },
  {
    label: "floor: bare node -e HTTP server",
    argv: [
      process.execPath,
      "-e",
      "require('http').createServer((q,s)=>s.end('ok')).listen(+process.env.PORT,'127.0.0.1');process.on('SIGTERM',()=>process.exit(0))",
    ],
  },
];

// The launcher rebuilds when the code changed: build now (so no round includes it), and say what that costs.
if (existsSync(join(ROOT, "functions/start.mjs"))) {
  const forced = performance.now();
  const build = spawnSync(process.execPath, ["functions/start.mjs", "--build-only", "--force", "--template"], {
    cwd: ROOT,
    env: { ...process.env, PATH },
    encoding: "utf8",
  });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
  // --template as npm's postinstall runs it: fresh data directories copy the embedded database's template.
  console.log(`build (first start after a code change adds this) and template check: ${s(performance.now() - forced)}`);
}

const temp = mkdtempSync(join(tmpdir(), "ws-bench-start-"));
try {
  const floor = targets.at(-1)!;
  const floorRuns: number[] = [];
  for (let i = 0; i < ROUNDS; i++) floorRuns.push((await timeStart(floor.argv, {})).readyMs);
  const floorMs = median(floorRuns);
  console.log(`${floor.label}: ${s(floorMs)}`);

  for (const target of targets.slice(0, -1)) {
    const fresh: Run[] = [];
    const existing: Run[] = [];
    for (let i = 0; i < ROUNDS; i++) fresh.push(await timeStart(target.argv, { DATA_DIR: mkdtempSync(join(temp, "fresh-")) }));
    const dir = mkdtempSync(join(temp, "existing-"));
    await timeStart(target.argv, { DATA_DIR: dir });
    for (let i = 0; i < ROUNDS; i++) existing.push(await timeStart(target.argv, { DATA_DIR: dir }));
    const f = median(fresh.map((r) => r.readyMs));
    const e = median(existing.map((r) => r.readyMs));
    console.log(
      `${target.label}: fresh data dir ${s(f)} (${(f / floorMs).toFixed(1)}× floor), existing ${s(e)} (${(e / floorMs).toFixed(1)}× floor); ` +
        `stop on SIGTERM ${s(median([...fresh, ...existing].map((r) => r.stopMs)))}; rounds: fresh ${fresh.map((r) => s(r.readyMs)).join(", ")}; existing ${existing.map((r) => s(r.readyMs)).join(", ")}`,
    );
    // Issue 25: `npm start` ready within 1 s on an existing data directory, 3 s on a fresh one.
    for (const [what, ms, limit] of [
      ["existing data directory", e, 1_000],
      ["fresh data directory", f, 3_000],
    ] as const) {
      report({
        measure: `${target.label}: first answer, ${what}`,
        figure: s(ms),
        floor: `${s(floorMs)} (${floor.label})`,
        ratio: ms / floorMs,
        target: `≤ ${s(limit)}`,
        met: ms <= limit,
      });
    }
  }
} finally {
  rmSync(temp, { recursive: true, force: true });
}
