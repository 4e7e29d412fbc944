/**
 * `wsp runner` and `wsp deploy` as real child processes, for the end-to-end tests of build
 * servers attached to a self-hosted instance (test/node/runner/remote-runner.test.ts) and to
 * the cloud Worker (test/node/runner/cloud-runners.test.ts); a GET with a Host of its own (an
 * app's name, through an edge: fetch() replaces Host with the URL's); and a loopback TCP
 * proxy that can be paused, to take the API away from one runner while the rest goes on.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { createServer, type Server, type Socket, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FIXTURE_APP } from "./runner-harness";

export const WSP = join(import.meta.dirname, "..", "..", "functions", "cli", "wsp.mjs");

export interface WspRunner {
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  out: () => string;
  exited: Promise<number | null>;
}

/** Every runner started by startWspRunner and still running: kill them in afterAll. */
export const liveRunners = new Set<ChildProcess>();

/** `wsp runner` on its own work directory, with the runner suites' short timeouts; the token in the environment, never an argument. */
export function startWspRunner(opts: { api: string; token: string; workDir: string; args?: string[]; env?: Record<string, string> }): WspRunner {
  const child = spawn(process.execPath, [WSP, "runner", "--api", opts.api, "--work-dir", opts.workDir, ...(opts.args ?? [])], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      WORKSPACE_RUNNER_TOKEN: opts.token,
      BUILD_TIMEOUT: "60s",
      HEALTH_TIMEOUT: "20s",
      STOP_GRACE: "1s",
      SMOKE_WINDOW: "0s",
      OUTBOUND_ALLOW_PRIVATE: "true",
      ...opts.env,
    },
  });
  liveRunners.add(child);
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) =>
    child.on("close", (code) => {
      liveRunners.delete(child);
      resolve(code);
    }),
  );
  return { child, out: () => out, exited };
}

/** Every live runner killed at once (afterAll: a test that failed midway leaves none behind). */
export function killRunners(): void {
  for (const child of liveRunners) child.kill("SIGKILL");
}

/** Runs `wsp <args>` to its end. */
export function wspCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [WSP, ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out, err })));
}

/**
 * The fixture app in a new folder (`dir`, or one under the temp dir: the caller removes it);
 * `slowBuild`: its build waits that many seconds first (time to stop a runner mid-build).
 */
export function appFolder(slowBuild = 0, dir = mkdtempSync(join(tmpdir(), "ws-remote-app-"))): string {
  cpSync(FIXTURE_APP, dir, { recursive: true });
  if (slowBuild > 0) {
    const pkg = { name: "runner-fixture-app", version: "1.0.0", private: true, scripts: { build: "node wait.js && node build.js", start: "node server.js" } };
    writeFileSync(join(dir, "package.json"), JSON.stringify(pkg));
    writeFileSync(join(dir, "wait.js"), `setTimeout(() => {}, ${slowBuild * 1000});\n`);
  }
  return dir;
}

/** Polls `read` every 250 ms until it gives something truthy. */
export async function until<T>(what: string, read: () => Promise<T | undefined | null | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Queues `wsp deploy <dir> --no-wait` against `api`; the deployment id it printed. */
export async function queueFolderDeploy(api: string, token: string, dir: string): Promise<string> {
  const queued = await wspCli(["deploy", dir, "--api", api, "--token", token, "--no-wait"]);
  const id = /(dpl_[0-9a-z]+)/.exec(queued.out + queued.err)?.[1];
  if (queued.code !== 0 || !id) throw new Error(`wsp deploy --no-wait exited ${queued.code}:\n${queued.out}\n${queued.err}`);
  return id;
}

/** GET `url` with the Host header `host` (node:http: fetch() would send the URL's own); never throws on a status. */
export function getWithHost(url: string, host: string, timeoutMs = 15_000): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, headers: { host }, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} (Host ${host}) took over ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end();
  });
}

/** A loopback port free a moment ago (for a runner's --edge-port, which must be known before it starts: its server's publicUrl). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", () => resolve()));
  const { port } = s.address() as { port: number };
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

export interface PausableProxy {
  /** `http://127.0.0.1:<port>`: the target, through the proxy. */
  url: string;
  /** Stops listening and drops every connection: the target is unreachable through it (connection refused). */
  pause(): Promise<void>;
  /** Listens again on the same port. */
  resume(): Promise<void>;
  close(): Promise<void>;
}

/** A loopback TCP proxy to `target` (`host:port`) that can be paused: an API outage as a runner sees it. */
export async function startPausableProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<PausableProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    const s = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      sockets.add(client).add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(client);
        sockets.delete(upstream);
      };
      client.on("error", drop).on("close", drop);
      upstream.on("error", drop).on("close", drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => resolve());
    });
    port = (s.address() as { port: number }).port;
    server = s;
  };
  const pause = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  await listen();
  return { url: `http://127.0.0.1:${port}`, pause, resume: listen, close: pause };
}
