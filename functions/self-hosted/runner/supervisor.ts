/**
 * The supervisor runs AppSpecs (types.ts) on the self-hosted runner.
 *
 * - `processes`: picks a free loopback port, starts every ProcessSpec
 *   (processes.ts: own process group, only its environment, the app's memory
 *   limit) with `PORT=<port>` added for the http one, and streams their output as
 *   `runtime` lines (stream stdout/stderr, `fields.process` = the process name);
 *   its own messages (started, exited, restarting, gave up) are `system` lines.
 *   The health check: `GET http://127.0.0.1:<port><healthPath>` (polled every
 *   HEALTH_FAST_POLL_MS for the first 2 s, then every HEALTH_POLL_MS, each
 *   attempt at most HEALTH_ATTEMPT_MS) passes on any answer to `/` when the
 *   project sets no healthCheckPath, on a 2xx or 3xx answer when it does. Then
 *   the smoke window (`smokeWindowMs`, SMOKE_WINDOW): the app must not exit
 *   and must still pass the check at its end. `launch` resolves after that,
 *   and rejects after stopping what it started if a process exits first (any
 *   process: a compose service that exits during the launch fails it too), if
 *   the health timeout passes, if the check fails at the end of the window, or
 *   if the signal aborts.
 * - `static`: serves the directory with static-server.ts on a free loopback port
 *   and resolves at once.
 * - After the launch, a process that exits on its own is a crash: what it left in
 *   its group is stopped, and it is started again after a backoff (base delay
 *   doubling per crash in the window, capped), on the same port, so routing does
 *   not change; if another process took that port meanwhile, on a new one. From
 *   the crash until the restarted app passes its check again the app is down:
 *   `onDown` at the crash, `onUp` with its port once it answers (the runner
 *   takes the route off and puts it back: edges hold requests meanwhile). More than `maxRestarts` crashes of the app within `windowMs` gives
 *   it up: everything of the app is stopped and `onGiveUp` is called.
 * - `stop`: no restarts from then on; SIGTERM to every process group, SIGKILL
 *   after `stopGraceMs`; or the static server closed.
 */
import { createServer } from "node:net";
import { request } from "node:http";
import type { NewLogLine } from "../../logs/store";
import { join } from "node:path";
import { type ProcessExit, type SpawnedProcess, spawnProcess } from "./processes";
import { DISK_APP_CHECK_MS, formatGb, watchDisk } from "./sandbox/disk";
import type { Jail } from "./sandbox/sandbox";
import { type StaticServer, startStaticServer } from "./static-server";
import type { AppSpec, LaunchOptions, ProcessSpec, RunningApp, Supervisor, SupervisorDeps } from "./types";

/** The launch failed after the app first passed its health check: it went down within the smoke window. */
export class SmokeWindowFailure extends Error {}

export const HEALTH_POLL_MS = 100;
/** For the first HEALTH_FAST_MS of a launch the port is tried every HEALTH_FAST_POLL_MS: a refused connection costs well under a millisecond, and most apps answer within a second, so readiness is seen within ~10 ms of it. */
export const HEALTH_FAST_POLL_MS = 10;
export const HEALTH_FAST_MS = 2_000;
export const HEALTH_ATTEMPT_MS = 1000;
/** At the end of the smoke window the check must pass again within this. */
export const SMOKE_RECHECK_MS = 2000;
export const DEFAULT_RESTART_POLICY = { baseDelayMs: 1000, maxDelayMs: 30_000, maxRestarts: 5, windowMs: 10 * 60_000 };

interface ProcState {
  spec: ProcessSpec;
  current?: SpawnedProcess;
  restartTimer?: ReturnType<typeof setTimeout>;
}

interface AppState {
  spec: AppSpec;
  port: number;
  launched: boolean;
  stopping: boolean;
  procs: ProcState[];
  staticServer?: StaticServer;
  /** Times of the crashes within the policy window. */
  crashes: number[];
  stopDiskWatch?: () => void;
  /** Set while launching: fails the launch with a reason. */
  failLaunch?: (reason: Error) => void;
  /** When it first passed its health check (the smoke window runs from there), while launching. */
  answeredAt?: number;
  /** After a crash restart: waits for the health check to pass again (then onUp); aborted by the next crash or a stop. */
  upWatch?: AbortController;
  stopped?: Promise<void>;
}

export function createSupervisor(deps: SupervisorDeps): Supervisor {
  const policy = { ...DEFAULT_RESTART_POLICY, ...deps.restart };
  const apps = new Map<string, AppState>();

  const line = (app: AppState, stream: NewLogLine["stream"], message: string, processName?: string) =>
    deps.log({
      orgId: app.spec.orgId,
      projectId: app.spec.projectId,
      deploymentId: app.spec.deploymentId,
      kind: "runtime",
      stream,
      at: new Date(),
      message,
      fields: processName ? { process: processName } : null,
    });

  const describeExit = (exit: ProcessExit, memoryMb: number | undefined): string => {
    if (exit.error) return `could not start (${exit.error})`;
    if (exit.memoryExceeded) return `was killed: memory limit${memoryMb ? ` (${memoryMb} MiB)` : ""} exceeded`;
    if (exit.signal) return `was killed by ${exit.signal}`;
    return `exited with code ${exit.code}`;
  };
  const who = (app: AppState, proc: ProcState) =>
    app.procs.length === 1 ? "the app" : proc.spec.http ? `the app (${proc.spec.name})` : `service ${proc.spec.name}`;

  let spawns = 0;
  const start = async (app: AppState, proc: ProcState) => {
    const env = proc.spec.http ? { ...proc.spec.env, PORT: String(app.port) } : proc.spec.env;
    const confinement = app.spec.kind === "processes" ? app.spec.confinement : undefined;
    let jail: Jail | undefined;
    try {
      jail = confinement
        ? await deps.jail?.({
            name: `${app.spec.deploymentId}.${proc.spec.name.replace(/[^A-Za-z0-9_-]/g, "_")}.${++spawns}`,
            uid: confinement.uid,
            workDir: confinement.workDir,
            cacheDir: confinement.cacheDir,
            limits: { memoryMb: app.spec.memoryMb, cpuCores: confinement.cpuCores, diskBytes: confinement.diskGb ? confinement.diskGb * 1024 ** 3 : undefined },
          })
        : undefined;
    } catch (error) {
      void onExit(app, proc, undefined, { code: null, signal: null, error: `its sandbox could not be made: ${(error as Error).message}` });
      return;
    }
    if (app.stopping) {
      await jail?.cgroup?.remove();
      return;
    }
    const spawned = spawnProcess({
      command: proc.spec.command,
      cwd: proc.spec.cwd,
      env,
      memoryMb: app.spec.memoryMb,
      jail,
      onLine: (stream, text) => line(app, stream, text, proc.spec.name),
      onSkipped: (lines) => deps.skipped?.(app.spec.deploymentId, lines),
    });
    proc.current = spawned;
    if (spawned.pid > 0) line(app, "system", `Started ${proc.spec.name} (pid ${spawned.pid})${proc.spec.http ? ` with PORT=${app.port}` : ""}`, proc.spec.name);
    void spawned.exited.then((exit) => onExit(app, proc, spawned, exit));
  };

  const onExit = async (app: AppState, proc: ProcState, spawned: SpawnedProcess | undefined, exit: ProcessExit) => {
    if (app.stopping || proc.current !== spawned) return;
    const what = `${who(app, proc)} ${describeExit(exit, app.spec.memoryMb)}`;
    line(app, "system", `${proc.spec.name} ${describeExit(exit, app.spec.memoryMb)}`, proc.spec.name);
    if (!app.launched) {
      if (app.answeredAt === undefined) app.failLaunch?.(new Error(`${what} before answering on PORT ${app.port}`));
      else
        app.failLaunch?.(
          new SmokeWindowFailure(
            `${what} ${formatDuration(Date.now() - app.answeredAt)} after it first answered, within the smoke window (SMOKE_WINDOW, ${formatDuration(deps.smokeWindowMs ?? 0)})`,
          ),
        );
      return;
    }
    // Nothing answers until the restart passed its check again: the runner takes the route off (edges hold requests meanwhile).
    if (proc.spec.http) {
      app.upWatch?.abort();
      deps.onDown?.(app.spec, what);
    }
    // What the process left behind in its group could hold the port: end it first.
    await spawned?.stop(deps.stopGraceMs);
    if (app.stopping) return;
    const now = Date.now();
    app.crashes = app.crashes.filter((t) => now - t < policy.windowMs);
    app.crashes.push(now);
    const attempt = app.crashes.length;
    if (attempt > policy.maxRestarts) {
      const reason = `${what}; it crashed ${attempt} times within ${formatDuration(policy.windowMs)}`;
      line(app, "system", `Gave up restarting: ${reason}`, proc.spec.name);
      // Told first: from here the runner must not start it again while it is being stopped and recorded.
      deps.onGiveUp?.(app.spec, reason);
      await stopApp(app);
      return;
    }
    const delay = Math.min(policy.baseDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
    line(
      app,
      "system",
      `Restarting ${proc.spec.name} in ${formatDuration(delay)} (restart ${attempt} of at most ${policy.maxRestarts} within ${formatDuration(policy.windowMs)})`,
      proc.spec.name,
    );
    proc.restartTimer = setTimeout(() => {
      proc.restartTimer = undefined;
      if (app.stopping) return;
      void restart(app, proc, attempt, what);
    }, delay);
  };

  const restart = async (app: AppState, proc: ProcState, attempt: number, what: string) => {
    // Another process may have taken the port meanwhile: the app then moves, and the route follows (onUp's port).
    if (proc.spec.http && !(await portIsFree(app.port))) {
      const old = app.port;
      try {
        app.port = await freePort();
      } catch (error) {
        void onExit(app, proc, proc.current, { code: null, signal: null, error: `no free port: ${(error as Error).message}` });
        return;
      }
      line(app, "system", `Port ${old} is in use by another process: ${proc.spec.name} restarts on port ${app.port}`, proc.spec.name);
    }
    if (app.stopping) return;
    void start(app, proc);
    deps.onRestart?.(app.spec, attempt, what);
    if (proc.spec.http) {
      // Back on the route once it passes its check again (a crash before that aborts the watch and reports down again).
      const watch = new AbortController();
      app.upWatch = watch;
      const check = { path: app.spec.healthPath ?? "/", strict: app.spec.healthPath !== undefined };
      const port = app.port;
      if (await waitForHttp(port, check, deps.healthTimeoutMs, watch.signal)) {
        if (!watch.signal.aborted && !app.stopping) {
          line(app, "system", `Answering on port ${port} again`, proc.spec.name);
          deps.onUp?.(app.spec, port);
        }
      }
    }
  };

  /** The disk limit of a running app: over it, the app is stopped and the runner told (it records the reason). */
  const watchAppDisk = (app: AppState) => {
    const c = app.spec.kind === "processes" ? app.spec.confinement : undefined;
    if (!c?.diskGb) return;
    const paths = [join(c.workDir, "src"), join(c.workDir, "home"), ...(c.cacheDir ? [c.cacheDir] : [])];
    app.stopDiskWatch = watchDisk(paths, c.diskGb * 1024 ** 3, DISK_APP_CHECK_MS, (used) => {
      const reason = `disk limit (${c.diskGb} GB) exceeded: the app's directory holds ${formatGb(used)}`;
      line(app, "system", `Stopped: ${reason}`);
      deps.onDiskExceeded?.(app.spec, reason);
      void stopApp(app);
    });
  };

  const stopApp = (app: AppState): Promise<void> => {
    app.stopping = true;
    app.stopDiskWatch?.();
    app.upWatch?.abort();
    app.stopped ??= (async () => {
      app.failLaunch?.(new Error("the app was stopped before it answered"));
      for (const proc of app.procs) {
        if (proc.restartTimer) clearTimeout(proc.restartTimer);
        proc.restartTimer = undefined;
      }
      await Promise.all(app.procs.map((proc) => proc.current?.stop(deps.stopGraceMs)));
      await app.staticServer?.close();
      if (apps.get(app.spec.deploymentId) === app) apps.delete(app.spec.deploymentId);
      if (app.launched) line(app, "system", "Stopped");
    })();
    return app.stopped;
  };

  const launch = async (spec: AppSpec, options: LaunchOptions = {}): Promise<RunningApp> => {
    if (apps.has(spec.deploymentId)) throw new Error(`deployment ${spec.deploymentId} is already running`);
    if (options.signal?.aborted) throw new Error("the launch was canceled");
    const app: AppState = { spec, port: 0, launched: false, stopping: false, procs: [], crashes: [] };
    apps.set(spec.deploymentId, app);

    if (spec.kind === "static") {
      try {
        app.staticServer = await startStaticServer(spec.dir, spec.base);
      } catch (error) {
        apps.delete(spec.deploymentId);
        throw new Error(`the static site could not be served from its output directory: ${(error as Error).message}`);
      }
      app.port = app.staticServer.port;
      app.launched = true;
      line(app, "system", `Serving the static site on port ${app.port}`);
      return { deploymentId: spec.deploymentId, port: app.port };
    }

    if (!spec.processes.some((p) => p.http)) {
      apps.delete(spec.deploymentId);
      throw new Error("the app has no web process (no process answers HTTP)");
    }
    try {
      app.port = await freePort();
    } catch (error) {
      apps.delete(spec.deploymentId);
      throw error;
    }
    app.procs = spec.processes.map((p) => ({ spec: p }));
    const health = new AbortController();
    let rejectLaunch!: (reason: Error) => void;
    const failed = new Promise<never>((_, reject) => {
      rejectLaunch = reject;
    });
    failed.catch(() => {});
    app.failLaunch = (reason) => {
      app.failLaunch = undefined;
      // Rejected before the waits are aborted: a race with `failed` then settles on this reason, not on an aborted wait.
      rejectLaunch(reason);
      health.abort();
    };
    const onAbort = () => app.failLaunch?.(new Error("the launch was canceled"));
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (app.stopping) throw new Error("the app was stopped before it answered");
      await Promise.all(app.procs.map((proc) => start(app, proc)));
      const seconds = formatDuration(deps.healthTimeoutMs);
      const check = { path: spec.healthPath ?? "/", strict: spec.healthPath !== undefined };
      // What the check wants, as a reason says it.
      const shown = check.strict ? `a 2xx or 3xx answer to GET ${check.path} (the project's healthCheckPath)` : "an answer to HTTP";
      await Promise.race([waitForHttp(app.port, check, deps.healthTimeoutMs, health.signal), failed]).then((answered) => {
        if (!answered)
          throw new Error(
            check.strict
              ? `the app did not give ${shown} on PORT ${app.port} within ${seconds}`
              : `the app did not answer HTTP on PORT ${app.port} within ${seconds} (it must listen on the port given in the PORT environment variable)`,
          );
      });
      if (app.stopping) throw new Error("the app was stopped before it answered");
      const smokeMs = options.smokeWindow === false ? 0 : (deps.smokeWindowMs ?? 0);
      if (smokeMs > 0) {
        // Live only once it stayed up: a crash here fails the launch (onExit), and the previous app was never stopped.
        app.answeredAt = Date.now();
        line(app, "system", `Answering on port ${app.port}; it must stay up for ${formatDuration(smokeMs)} (SMOKE_WINDOW) before it goes live`);
        await Promise.race([abortableSleep(smokeMs, health.signal), failed]);
        const still = await Promise.race([waitForHttp(app.port, check, SMOKE_RECHECK_MS, health.signal), failed]);
        if (!still)
          throw new SmokeWindowFailure(
            `the app no longer gave ${shown} on PORT ${app.port} at the end of its smoke window (SMOKE_WINDOW, ${formatDuration(smokeMs)})`,
          );
        if (app.stopping) throw new Error("the app was stopped before it went live");
      }
      app.failLaunch = undefined;
      app.launched = true;
      line(app, "system", `Answering HTTP on port ${app.port}`);
      watchAppDisk(app);
      return { deploymentId: spec.deploymentId, port: app.port };
    } catch (error) {
      app.failLaunch = undefined;
      health.abort();
      line(app, "system", `Launch failed: ${(error as Error).message}`);
      await stopApp(app);
      throw error;
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
    }
  };

  return {
    launch,
    async stop(deploymentId) {
      const app = apps.get(deploymentId);
      if (app) await stopApp(app);
    },
    async stopAll() {
      await Promise.all([...apps.values()].map(stopApp));
    },
    running() {
      return [...apps.values()].filter((a) => a.launched && !a.stopping).map((a) => ({ deploymentId: a.spec.deploymentId, port: a.port }));
    },
  };
}

/** Whether 127.0.0.1:port can be bound now (nothing else listens there). */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A free loopback port: bind 127.0.0.1:0, read it, close. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The health check: any answer to `path`, or (strict: a healthCheckPath was set) a 2xx or 3xx one. */
interface HealthCheck {
  path: string;
  strict: boolean;
}

/** Polls until the health check passes (true), the time is up or the signal aborts (false). */
async function waitForHttp(port: number, check: HealthCheck, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const begun = Date.now();
  const deadline = begun + timeoutMs;
  while (!signal.aborted) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    const started = Date.now();
    if (await answers(port, check, Math.min(HEALTH_ATTEMPT_MS, left), signal)) return true;
    const interval = started - begun < HEALTH_FAST_MS ? HEALTH_FAST_POLL_MS : HEALTH_POLL_MS;
    const wait = Math.min(interval - (Date.now() - started), deadline - Date.now());
    if (wait > 0) await abortableSleep(wait, signal);
  }
  return false;
}

function answers(port: number, check: HealthCheck, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const headers = { "user-agent": "wsp-runner-health" };
    const req = request({ host: "127.0.0.1", port, path: check.path, method: "GET", agent: false, signal, headers }, (res) => {
      res.resume();
      const status = res.statusCode ?? 0;
      resolve(!check.strict || (status >= 200 && status < 400));
      req.destroy();
    });
    req.setTimeout(timeoutMs, () => req.destroy());
    req.on("error", () => resolve(false));
    req.on("close", () => resolve(false));
    req.end();
  });
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function formatDuration(ms: number): string {
  if (ms % 60_000 === 0 && ms >= 60_000 && ms !== 60_000) return `${ms / 60_000} minutes`;
  return `${Number((ms / 1000).toFixed(ms < 1000 ? 2 : 1))} s`;
}
