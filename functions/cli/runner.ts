/**
 * `wsp runner`: this machine becomes a build server of an organization. It runs
 * the self-hosted adapter's runner core (the same pipeline, supervisor and
 * bubblewrap sandbox, functions/self-hosted/runner/core.ts) on the runner
 * protocol with the server's runner token (http-control.ts), and heartbeats.
 *
 * - Its state (work directories of kept builds, build caches, the sandbox's
 *   cgroups are named after the server) lives under --work-dir: restarted on the
 *   same directory it forgets its previous ports, sweeps what a crash left, and
 *   brings the apps it serves back (the in-process runner's start).
 * - The API unreachable: the apps keep running (nothing stops on a failed call);
 *   calls are retried with backoff and jitter, the loops try again every pass,
 *   log lines wait in order (up to 20,000) and are sent once it answers.
 * - SIGTERM or SIGINT: no new claim; a build in flight is handed back to the
 *   queue (release), every app is stopped and its port forgotten (edges hold
 *   its requests); the deployments stay current on this server, and the next
 *   start brings them back. A second signal exits at once.
 * - The token refused (the server was deleted): it stops the same way, exit 1.
 */
import { mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { jsonLogger } from "../../shared/http/logger";
import { deriveEdgeKey } from "../../shared/net/edge-forward";
import { createServerEdge } from "../self-hosted/edge/server-edge";
import { loadNodeConfig } from "../self-hosted/config";
import { createRunnerCore } from "../self-hosted/runner/core";
import { ControlError, createHttpControl, type HeartbeatFacts } from "../self-hosted/runner/http-control";

export const RUNNER_SUMMARY = "attach this machine as a build server (runs builds and apps in the sandbox)";

export const RUNNER_USAGE = `Usage: wsp runner --api <url> [options]

Attaches this machine to an organization as a build server: claims the
deployments placed on it, builds and runs them in the same sandbox as a
self-hosted instance's runner (bubblewrap, cgroups v2), and reports back.
Register the server first (POST /api/servers, or Settings > Servers): its
runner token (wsr_…) is shown once.

Options:
  --api <url>          the API (default: $WORKSPACE_API_URL)
  --token <wsr_…>      the server's runner token (default: $WORKSPACE_RUNNER_TOKEN;
                       prefer the variable: arguments show in ps)
  --concurrency <n>    builds at once, 1-32 (default 1)
  --work-dir <dir>     builds, kept apps and caches (default: $WORKSPACE_RUNNER_DIR,
                       else ~/.local/state/wsp-runner); keep it across restarts
  --labels <a,b>       replace the server's labels (placement matches them)
  --edge-port <port>   serve the apps' edge on this port (all addresses): only requests
                       the control plane's edge forwarded, signed, reach an app (the
                       server's publicUrl points here)
  -h, --help           this help

The runner's other settings are the adapter's variables (BUILD_TIMEOUT,
HEALTH_TIMEOUT, STOP_GRACE, SMOKE_WINDOW, SLEEP_AFTER, RUNNER_SANDBOX,
RUNNER_UID_RANGE, RUNNER_PIDS_MAX, RUNNER_NOFILE, RUNNER_LOG_RATE,
BUILD_ENV_PASSTHROUGH, GIT_*_URL, OUTBOUND_ALLOW_PRIVATE).
SIGTERM hands a build in flight back to the queue and stops the apps; the
next start on the same --work-dir brings them back.
`;

/** What the command reads and writes (main.ts's Io fits). */
export interface RunnerIo {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  /** Aborted on Ctrl-C. */
  signal?: AbortSignal;
  cwd?: string;
}

const HEARTBEAT_MS = 15_000;
const VERSION = "0.1.0";

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((done) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        done();
      },
      { once: true },
    );
  });

/** `wsp runner [options]`: runs until SIGTERM/SIGINT (0) or until its token is refused (1); 2 for a usage mistake. */
export async function runnerMain(args: string[], io: RunnerIo): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args,
      strict: true,
      options: {
        api: { type: "string" },
        token: { type: "string" },
        concurrency: { type: "string" },
        "work-dir": { type: "string" },
        labels: { type: "string" },
        "edge-port": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (e) {
    io.err(`${(e as Error).message}\n\n${RUNNER_USAGE}`);
    return 2;
  }
  if (values.help) {
    io.out(RUNNER_USAGE);
    return 0;
  }
  const usage = (message: string) => {
    io.err(`${message}\n\n${RUNNER_USAGE}`);
    return 2;
  };
  const api = (values.api as string | undefined) ?? io.env.WORKSPACE_API_URL;
  const token = (values.token as string | undefined) ?? io.env.WORKSPACE_RUNNER_TOKEN;
  if (!api || !URL.canParse(api)) return usage("--api (or WORKSPACE_API_URL) must be the API's URL");
  if (!token?.startsWith("wsr_")) return usage("--token (or WORKSPACE_RUNNER_TOKEN) must be the server's runner token (wsr_…)");
  const concurrency = Number(values.concurrency ?? "1");
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 32) return usage("--concurrency must be 1 to 32");
  const edgePort = values["edge-port"] === undefined ? undefined : Number(values["edge-port"]);
  if (edgePort !== undefined && !(Number.isInteger(edgePort) && edgePort >= 1 && edgePort <= 65535)) return usage("--edge-port must be a port, 1 to 65535");
  const labels =
    values.labels === undefined
      ? undefined
      : [
          ...new Set(
            (values.labels as string)
              .split(",")
              .map((l) => l.trim())
              .filter(Boolean),
          ),
        ];
  const workDir = resolve(
    io.cwd ?? process.cwd(),
    (values["work-dir"] as string | undefined) ?? io.env.WORKSPACE_RUNNER_DIR ?? join(homedir(), ".local", "state", "wsp-runner"),
  );
  mkdirSync(workDir, { recursive: true, mode: 0o700 });

  let config: ReturnType<typeof loadNodeConfig>;
  try {
    config = loadNodeConfig({ ...io.env, DATA_DIR: workDir, RUNNER: "on", RUNNER_CONCURRENCY: String(concurrency) });
  } catch (e) {
    return usage((e as Error).message);
  }
  const logger = jsonLogger((line) => io.out(`${line}\n`));
  const stop = new AbortController();
  let revoked = false;
  const control = createHttpControl({
    api,
    token,
    logger,
    onRevoked: () => {
      revoked = true;
      stop.abort();
    },
  });
  const onSignal = () => stop.abort();
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  io.signal?.addEventListener("abort", onSignal, { once: true });

  try {
    // Who this runner is: the server the token names (its id is the runner's id in claims and serving state).
    let serverId: string | undefined;
    while (!serverId && !stop.signal.aborted) {
      try {
        serverId = (await control.heartbeat({ version: VERSION, capacity: concurrency, ...(labels ? { labels } : {}) })).serverId;
      } catch (error) {
        if (revoked) break;
        if (error instanceof ControlError && error.status !== undefined && error.status < 500) {
          io.err(`The API refused the runner: ${error.message}\n`);
          return 1;
        }
        logger.error("runner_api_unreachable", { error: (error as Error).message });
        await sleep(5_000, stop.signal);
      }
    }
    if (!serverId) {
      if (revoked) io.err("The runner token was refused: the server was deleted, or the token is wrong.\n");
      return revoked ? 1 : 0;
    }
    const settings = { ...config.runner, id: serverId, concurrency };
    const core = await createRunnerCore({
      settings,
      gitHosts: config.gitHosts,
      dataDir: workDir,
      logger,
      allowPrivate: config.outboundAllowPrivate,
      control: () => control,
    });
    if (!core) {
      io.err("The sandbox cannot work on this machine (see runner_not_started above): install bubblewrap and run as root with cgroups v2.\n");
      return 1;
    }
    const facts: HeartbeatFacts = {
      version: VERSION,
      capacity: concurrency,
      sandbox: { confined: core.sandbox.confined, cgroups: core.sandbox.cgroups !== undefined, description: core.sandbox.describe().slice(0, 200) },
      limits: { pidsMax: settings.sandbox.pidsMax, nofile: settings.sandbox.nofile, buildTimeoutS: Math.round(settings.buildTimeoutMs / 1000) },
    };
    logger.info("runner_started", { serverId, workDir, concurrency, sandbox: core.sandbox.describe() });
    core.runner.start();
    const { runner } = core;
    let edgeServer: Server | undefined;
    if (edgePort !== undefined) {
      const edge = createServerEdge({
        edgeKey: await deriveEdgeKey(token),
        // Running here: its port; being built or launched here: none yet (held); else not this server's.
        portOf: (id) => runner.supervisor.running().find((a) => a.deploymentId === id)?.port ?? (runner.active().includes(id) ? null : undefined),
        onHeld: () => runner.wake(),
        holdMs: settings.healthTimeoutMs,
        logger,
      });
      edgeServer = createServer((req, res) => edge.handle(req, res));
      edgeServer.on("upgrade", (req, socket, head) => edge.upgrade(req, socket as Socket, head));
      await new Promise<void>((listening, failed) => {
        edgeServer!.once("error", failed);
        edgeServer!.listen(edgePort, () => listening());
      });
      logger.info("runner_edge_listening", { port: edgePort });
    }
    const beat = async () => {
      try {
        await control.heartbeat(facts);
      } catch (error) {
        if (!revoked) logger.error("runner_heartbeat_failed", { error: (error as Error).message });
      }
    };
    void beat();
    const heartbeats = setInterval(() => void beat(), HEARTBEAT_MS);
    await new Promise<void>((done) => (stop.signal.aborted ? done() : stop.signal.addEventListener("abort", () => done(), { once: true })));

    clearInterval(heartbeats);
    logger.info("runner_stopping", { serverId, reason: revoked ? "token refused" : "signal" });
    process.once("SIGTERM", () => process.exit(143));
    process.once("SIGINT", () => process.exit(130));
    control.interrupt();
    edgeServer?.close();
    await core.runner.stop();
    // Its apps are gone: the edges hold their requests until the next start brings them back.
    if (!revoked) await control.forgetPorts().catch(() => {});
    await core.sandbox.close();
    await control.close();
    logger.info("runner_stopped", { serverId });
    if (revoked) io.err("The runner token was refused: the server was deleted. Its apps were stopped.\n");
    return revoked ? 1 : 0;
  } finally {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  }
}
