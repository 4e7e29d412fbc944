/**
 * `npm run bench:newcomer`: a new user's first hour, timed step by step (issue 23).
 *
 * What the README's quick start and "Deploy your first app" ask, as a script:
 * a fresh clone of this repository's committed HEAD into a temporary folder →
 * `npm install` → `npm start` (a fresh data directory, a free port) until it
 * prints where it listens → `wsp login --token <data/owner-token>` → `wsp deploy`
 * of a small app folder (the README's hello app) → the first 200 of the app
 * through the edge (`Host: hello.localhost`). Each step's seconds are printed,
 * and the total. The npm cache of this machine is used as a newcomer's would be
 * (the registry is the only network). Needs bubblewrap and root like any build.
 *
 * BENCH_OMIT_DEV=1 installs with `npm ci --omit=dev` instead (an operator who
 * never runs the tests).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { httpGet, report, stopChild } from "./common";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");
const OMIT_DEV = !!process.env.BENCH_OMIT_DEV;

async function freePort(): Promise<number> {
  return new Promise((ok) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

/** Resolves once the server prints where it listens; rejects when it exits first. */
function listening(child: ChildProcess, timeoutMs: number): Promise<void> {
  return new Promise((ok, fail) => {
    let out = "";
    const timer = setTimeout(() => fail(new Error(`npm start printed no address within ${timeoutMs / 1000} s:\n${out.slice(-2000)}`)), timeoutMs);
    const onData = (d: Buffer) => {
      out += d;
      if (/listening|http:\/\/127\.0\.0\.1:\d+/i.test(out)) {
        clearTimeout(timer);
        ok();
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.on("exit", (code) => fail(new Error(`npm start exited (${code}):\n${out.slice(-2000)}`)));
  });
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), "bench-newcomer-"));
  const home = join(work, "home");
  mkdirSync(home);
  const clone = join(work, "workspace-service");
  // A newcomer's shell: none of the npm_* / INIT_CWD variables this script inherits when npm started it.
  const shell = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_") && k !== "INIT_CWD"));
  const env = { ...shell, HOME: home, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" };
  const steps: Array<[string, number]> = [];
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const value = await fn();
    steps.push([name, (performance.now() - t) / 1000]);
    console.log(`${name.padEnd(44)} ${((performance.now() - t) / 1000).toFixed(1).padStart(6)} s`);
    return value;
  };
  let server: ChildProcess | undefined;
  try {
    await timed("git clone (this repository's HEAD)", () => run("git", ["clone", "--quiet", ROOT, clone]));
    await timed(OMIT_DEV ? "npm ci --omit=dev" : "npm install", () =>
      run("npm", OMIT_DEV ? ["ci", "--omit=dev"] : ["install"], { cwd: clone, env, maxBuffer: 64 * 1024 * 1024 }),
    );
    const port = await freePort();
    server = spawn("npm", ["start"], { cwd: clone, env: { ...env, PORT: String(port), HOST: "127.0.0.1" }, detached: true });
    await timed("npm start (fresh data directory) → listening", () => listening(server!, 180_000));
    const api = `http://127.0.0.1:${port}`;
    const token = readFileSync(join(clone, "data", "owner-token"), "utf8").trim();
    const wsp = (args: string[], cwd: string) => run(process.execPath, [join(clone, "functions/cli/wsp.mjs"), ...args], { cwd, env });
    await timed("wsp login --token", () => wsp(["login", "--token", token, "--api", api], clone));
    const app = join(home, "hello");
    mkdirSync(app);
    writeFileSync(join(app, "server.js"), 'require("node:http").createServer((req, res) => res.end("hello v1\\n")).listen(process.env.PORT);\n');
    writeFileSync(join(app, "package.json"), '{"name": "hello", "scripts": {"start": "node server.js"}}\n');
    await timed("wsp deploy (the hello app) → ready", () => wsp(["deploy"], app));
    await timed("first 200 through the edge", async () => {
      for (;;) {
        const res = await httpGet(`${api}/`, "hello.localhost").catch(() => ({ status: 0, body: "" }));
        if (res.status === 200 && res.body === "hello v1\n") return;
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    const total = steps.reduce((sum, [, s]) => sum + s, 0);
    console.log(`${"total".padEnd(44)} ${total.toFixed(1).padStart(6)} s`);
    report({
      measure: `newcomer: fresh clone → ${OMIT_DEV ? "npm ci --omit=dev" : "npm install"} → npm start → wsp login → wsp deploy → first 200`,
      figure: `${total.toFixed(1)} s (${steps.map(([n, s]) => `${n.split(" ")[0]} ${n.split(" ")[1] ?? ""} ${s.toFixed(1)} s`).join("; ")})`,
      floor: null,
      ratio: null,
      target: "reported (each step's seconds)",
      met: true,
    });
  } finally {
    if (server?.pid) {
      // npm start runs node under npm: the whole group stops.
      try {
        process.kill(-server.pid, "SIGTERM");
      } catch {}
      await stopChild(server).catch(() => {});
    }
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
