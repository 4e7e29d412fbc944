/**
 * The self-hosted runner: claims queued deployments, builds them (pipeline.ts),
 * hands the app to the supervisor, switches traffic, reports. Everything it
 * reads from or records in the control plane goes through `control`
 * (RunnerControl, control.ts): the database here (db-control.ts), HTTP for a
 * runner on another machine; this core is the same for both.
 *
 * - Queue: claimed with a lease (LEASE_MS, 30 s) renewed every 10 s; woken by
 *   `wake()` (POST /api/deployments, cancel, promote call it) and a poll every
 *   POLL_MS (2 s, which also picks up jobs queued through another process);
 *   RUNNER_CONCURRENCY jobs at once. A renew (every 10 s, and at every wake) that
 *   finds the row canceled or no longer ours aborts the job: the AbortController
 *   kills the running step's process group; `canceled` stays as recorded.
 * - Switch: building → deploying (after the build, before the launch) → the
 *   supervisor starts the app and resolves once it answers HTTP → the port and
 *   this runner's id are recorded → markReady (current; the previous current one
 *   is not) → the previous current app is stopped (grace period, then kill): the
 *   new one answers before the old one stops (zero downtime).
 * - Failures: a deployment that does not go live → failed + one event:
 *   `build.failed` (source, install, build; data.stage `build`), which the
 *   fan-out delivers to `deploy.failed` subscribers too, once (categories.ts),
 *   or `deploy.failed` (start, health: data.stage `start`; a crash or a failed
 *   check within the smoke window: `smoke`). The reason names
 *   the step, the exit code, the first error lines and the last lines
 *   (failure-reason.ts). A failed or canceled deployment's work directory is removed; a
 *   ready one is kept (promote without a rebuild); superseded ready ones beyond
 *   the newest KEEP_SUPERSEDED (3) per environment are pruned (promoting one of
 *   those fails with a reason: redeploy it).
 * - Crashes: the supervisor restarts with backoff; after 5 crashes in 10 minutes
 *   it gives up: crashed_at is set (the deployment stays the record, it no
 *   longer serves) and `service.crashed` is emitted.
 * - Start: the ports a previous run of this runner recorded are forgotten
 *   (its apps died with it) before the apps are restored, each on a new free
 *   port; edges hold requests meanwhile.
 * - Reconcile (at start, at every wake, every RECONCILE_MS = 5 s): every current,
 *   ready, not crashed deployment served by this runner (served_by = RUNNER_ID)
 *   runs here: a missing one is launched from its work directory (boot restore,
 *   promote of an older ready deployment); a running one that is no longer
 *   current is stopped after that (promote: the promoted one answers first).
 *   Current deployments served by another runner are that runner's business.
 * - Stop (server shutdown): the loops stop, builds in flight are aborted and
 *   their deployments go back to `queued` (recorded, unclaimed), so the next
 *   start (or another runner) builds them at once; then every app is stopped.
 * - Build cache: each project's npm and Node compile caches persist across its
 *   deployments (build-cache.ts); caches of deleted projects go at start.
 * - Secrets: the environment's secret values are masked (••••••••) in every
 *   build and runtime line of the deployment before it is stored.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { GitHosts } from "../../../shared/git/hosts";
import type { Logger } from "../../../shared/http/logger";
import { recordWorkDirUsage } from "../work-dir-usage";
import type { NewLogLine } from "../../logs/store";
import { MASK } from "../../projects/env-store";
import type { RunnerSettings } from "../config";
import type { Plan } from "./commands";
import type { JobContext, RunnerControl, RunnerDeployment } from "./control";
import { createLogLimiter, REPORT_MS } from "./log-limit";
import { cacheDirOf, makeCache, sweepCachesOf } from "./build-cache";
import { createFailureDigest, type FailureDigest } from "./failure-reason";
import { buildDeployment, formatDuration, JobAborted, JobFailure, planPathOf, workDirOf } from "./pipeline";
import type { Sandbox } from "./sandbox/sandbox";
import { LEASE_MS } from "./store";
import { SmokeWindowFailure } from "./supervisor";
import type { AppSpec, Supervisor, SupervisorDeps } from "./types";

/**
 * How long a replaced app keeps running after the switch was committed: the
 * edges' route tables reload on the change notification well within this, so
 * no request is routed to an app that already stopped.
 */
export const EDGE_SWITCH_MS = 1_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const POLL_MS = 2000;
export const RECONCILE_MS = 5000;
export const KEEP_SUPERSEDED = 3;
/** The waits between the tries of an app that could not be started from its kept build (boot, promote); after the last, crashed. */
export const RESTORE_RETRY_MS = [5_000, 30_000, 120_000, 600_000];
const RENEW_MS = LEASE_MS / 3;

export interface RunnerDeps {
  /** The control plane: the queue, the job's source and environment, logs, events, serving state (control.ts). */
  control: RunnerControl;
  gitHosts: GitHosts;
  settings: RunnerSettings;
  /** DATA_DIR: work directories go under DATA_DIR/deployments/. */
  dataDir: string;
  logger: Logger;
  createSupervisor: (deps: SupervisorDeps) => Supervisor;
  /** What confines every step and app (sandbox/sandbox.ts). */
  sandbox: Sandbox;
  /** OUTBOUND_ALLOW_PRIVATE: whether a git host may be a private or loopback address. */
  allowPrivate: boolean;
  clock?: () => Date;
}

export interface Runner {
  readonly id: string;
  readonly supervisor: Supervisor;
  start(): void;
  /** A deployment was queued, canceled or promoted: claim, renew (a cancel aborts at once) and reconcile now. */
  wake(): void;
  /** Stops claiming, aborts builds (back to queued), stops every app. */
  stop(): Promise<void>;
  /** Deployment ids being built or launched now. */
  active(): string[];
  /** When the poll or reconcile loop last completed a pass (GET /readyz's `runner` check); undefined: none yet. */
  lastTickAt(): Date | undefined;
}

interface Job {
  d: RunnerDeployment;
  abort: AbortController;
  done: Promise<void>;
}

export function createRunner(deps: RunnerDeps): Runner {
  const { control, settings } = deps;
  const runnerId = settings.id;
  const now = deps.clock ?? (() => new Date());
  const workRoot = join(deps.dataDir, "deployments");
  const jobs = new Map<string, Job>();
  /** Deployments whose app a job or the reconcile loop is starting: reconcile leaves them alone. */
  const launching = new Set<string>();
  /** Secret values per deployment, masked in its lines. */
  const masks = new Map<string, string[]>();
  /** The output of each app being launched, for a failed start's reason. */
  const launchOutput = new Map<string, FailureDigest>();
  /** Apps given up (crash loop, disk limit) whose row is not yet marked crashed: not to be restored meanwhile. */
  const givingUp = new Set<string>();
  /** Deployments whose restore failed: how many tries so far, and when the next may run. */
  const restoreRetries = new Map<string, { tries: number; at: number }>();
  let started = false;
  let stopping = false;
  let lastTick: Date | undefined;
  let pollTimer: ReturnType<typeof setInterval> | undefined;
  let reconcileTimer: ReturnType<typeof setInterval> | undefined;
  let pumping: Promise<void> | undefined;
  let pumpAgain = false;
  let reconciling: Promise<void> | undefined;
  let reconcileAgain = false;

  const mask = (deploymentId: string | null, message: string) => {
    const secrets = deploymentId ? masks.get(deploymentId) : undefined;
    if (!secrets) return message;
    let out = message;
    for (const s of secrets) if (s.length >= 4 && out.includes(s)) out = out.replaceAll(s, MASK);
    return out;
  };
  const limiter = createLogLimiter(settings.logRate);
  const log = (line: NewLogLine) => {
    // The runner's own lines always go in; the processes' lines within RUNNER_LOG_RATE.
    if (line.deploymentId && line.stream !== "system" && !limiter.admit(line.deploymentId, Date.now())) {
      dropping.set(line.deploymentId, { orgId: line.orgId, projectId: line.projectId });
      return false;
    }
    const message = mask(line.deploymentId, line.message);
    // The app's own output; the supervisor's lines say what the reason's headline says.
    if (line.deploymentId && line.kind === "runtime" && line.stream !== "system") launchOutput.get(line.deploymentId)?.add(message);
    control.log({ ...line, message });
    return true;
  };
  const system = (d: Pick<RunnerDeployment, "id" | "orgId" | "projectId">, kind: "build" | "runtime", message: string) =>
    log({ orgId: d.orgId, projectId: d.projectId, deploymentId: d.id, kind, stream: "system", at: now(), message });

  const emit = async (d: RunnerDeployment, category: string, title: string, message: string, more: Record<string, unknown> = {}) => {
    try {
      await control.emit({
        orgId: d.orgId,
        category,
        title,
        message,
        projectId: d.projectId,
        data: { deploymentId: d.id, environmentId: d.environmentId, ...more },
      });
    } catch (error) {
      deps.logger.error("runner_event_failed", { deploymentId: d.id, category, error: (error as Error).message });
    }
  };

  const supervisor = deps.createSupervisor({
    log,
    skipped: (id, lines) => limiter.skipped(id, lines),
    healthTimeoutMs: settings.healthTimeoutMs,
    smokeWindowMs: settings.smokeWindowMs,
    restart: settings.restart,
    stopGraceMs: settings.stopGraceMs,
    jail: (input) => deps.sandbox.jail(input),
    // Down between a crash and the restarted app's next passed check: the route is off (edges hold requests, the project reads degraded), then back, on its port (a new one if its own was taken).
    onDown: (spec) => void control.recordDown(spec.deploymentId).catch((error) => reportRecordFailure(spec, error)),
    onUp: (spec, port) => void control.setServing(spec.deploymentId, port).catch((error) => reportRecordFailure(spec, error)),
    // One line in the server's output per crash of an app (its details are in the deployment's runtime log).
    onRestart: (spec, attempt, reason) =>
      deps.logger.error("app_crashed", { deploymentId: spec.deploymentId, projectId: spec.projectId, reason, restart: attempt }),
    // An app over its disk limit was stopped: recorded as crashed, like an app given up.
    onDiskExceeded: (spec, reason) => giveUp(spec, `was stopped: ${reason}`),
    onGiveUp: (spec, reason) => giveUp(spec, `crashed too often and was stopped: ${reason}`),
  });

  function reportRecordFailure(spec: AppSpec, error: unknown) {
    deps.logger.error("runner_route_record_failed", { deploymentId: spec.deploymentId, error: (error as Error).message });
  }

  /** The app no longer runs (`what` happened to it): recorded as crashed, `service.crashed` emitted. */
  function giveUp(spec: AppSpec, what: string) {
    deps.logger.error("app_stopped", { deploymentId: spec.deploymentId, projectId: spec.projectId, reason: what });
    // Until the row says crashed, the reconcile loop would see a current app that is not running and start it again.
    givingUp.add(spec.deploymentId);
    void (async () => {
      // The supervisor logged its restarts and the give-up as runtime system lines: stored before the row says crashed.
      await control.flushLogs();
      const row = await control.setCrashed(spec.deploymentId);
      masks.delete(spec.deploymentId);
      if (!row) return;
      const back = row.current ? await rollBack(row) : undefined;
      const then = back ? `; deployment ${back.id} was promoted in its place (autoRollback)` : "";
      await emit(row, "service.crashed", "Service crashed", `The app of deployment ${row.id} ${what}${then}`, back ? { rolledBackTo: back.id } : {});
    })()
      .catch((error) => deps.logger.error("runner_give_up_failed", { deploymentId: spec.deploymentId, error: (error as Error).message }))
      .finally(() => givingUp.delete(spec.deploymentId));
  }

  /**
   * autoRollback: the environment's previous ready deployment becomes current
   * again (its kept build and pinned configuration; the reconcile starts it, the
   * edges hold requests meanwhile), said on both deployments' runtime logs.
   */
  async function rollBack(crashed: RunnerDeployment): Promise<RunnerDeployment | undefined> {
    const env = await control.environment(crashed.environmentId);
    if (!env?.autoRollback) return undefined;
    const target = await control.rollbackTarget(crashed);
    if (!target) {
      system(crashed, "runtime", `No rollback: ${env.name} has no earlier ready deployment kept on this server`);
      return undefined;
    }
    try {
      await control.promote(crashed.orgId, target.id);
    } catch (error) {
      system(crashed, "runtime", `Rollback to deployment ${target.id} failed: ${(error as Error).message}`);
      return undefined;
    }
    system(crashed, "runtime", `Rolled back: deployment ${target.id} is ${env.name}'s current deployment again (autoRollback)`);
    system(target, "runtime", `Promoted again in place of deployment ${crashed.id}, whose app crashed too often (autoRollback)`);
    deps.logger.error("app_rolled_back", { deploymentId: crashed.id, projectId: crashed.projectId, to: target.id });
    void reconcile();
    return target;
  }

  /** Lines dropped over RUNNER_LOG_RATE: one system line per deployment and interval. */
  const reportDropped = () => {
    for (const { deploymentId, dropped } of limiter.due(Date.now())) {
      const kind = jobs.has(deploymentId) ? "build" : "runtime";
      const orgProject = dropping.get(deploymentId);
      dropping.delete(deploymentId);
      if (orgProject)
        control.log({
          ...orgProject,
          deploymentId,
          kind,
          stream: "system",
          at: now(),
          message: `${dropped} line${dropped === 1 ? "" : "s"} dropped: over the log limit of ${settings.logRate} lines per second (RUNNER_LOG_RATE)`,
        });
    }
  };
  /** Deployments with dropped lines not yet reported, and whose they are. */
  const dropping = new Map<string, { orgId: string; projectId: string }>();
  let reportTimer: ReturnType<typeof setInterval> | undefined;

  /** The project's sandbox uid (allocated at its first deployment; the server's own when the sandbox is off). */
  const uidOf = async (job: JobContext) =>
    deps.sandbox.confined ? control.sandboxUid(job.project, deps.sandbox.settings.uidRange) : (process.getuid?.() ?? 0);

  /** The app's environment: the environment's variables over a minimal base; nothing from the server's own environment. */
  const appSpecOf = async (job: JobContext, plan: Plan): Promise<AppSpec> => {
    const workDir = workDirOf(workRoot, job.d.id);
    const common = {
      deploymentId: job.d.id,
      orgId: job.d.orgId,
      projectId: job.d.projectId,
      environmentId: job.d.environmentId,
      healthPath: job.project.options.healthCheckPath,
    };
    if (plan.kind === "static") return { ...common, kind: "static", dir: plan.dir, base: join(workDir, "src") };
    const serviceValues = job.serviceValues;
    const uid = await uidOf(job);
    const cacheDir = cacheDirOf(deps.dataDir, job.d.projectId);
    // Its mount point: a deployment built before the cache existed, or restored after a sweep, has none yet.
    await makeCache(cacheDir, deps.sandbox.confined ? uid : undefined);
    // An app started through npm must not ask the registry about npm updates at every start (or restart).
    const base = { ...deps.sandbox.baseEnv(workDir, cacheDir), NODE_ENV: "production", npm_config_update_notifier: "false" };
    for (const values of Object.values(serviceValues)) masks.get(job.d.id)?.push(...Object.values(values));
    return {
      ...common,
      kind: "processes",
      memoryMb: job.project.productionMemoryMb,
      confinement: { uid, workDir, cacheDir, cpuCores: job.project.productionCpuCores, diskGb: job.project.diskGb },
      processes: plan.processes.map((p) => ({
        name: p.name,
        command: p.command,
        cwd: p.cwd,
        http: p.http,
        env: { ...base, ...job.env, ...(Object.hasOwn(serviceValues, p.name) ? serviceValues[p.name] : {}) },
      })),
    };
  };

  /** Starts the app; resolves with its port, or throws JobFailure("deploy") with the reason, the app's first error lines and its last lines. */
  const launch = async (job: JobContext, plan: Plan, signal?: AbortSignal, options: { smokeWindow?: boolean } = {}): Promise<number> => {
    const id = job.d.id;
    launching.add(id);
    const output = createFailureDigest();
    launchOutput.set(id, output);
    try {
      const app = await supervisor.launch(await appSpecOf(job, plan), { signal, smokeWindow: options.smokeWindow });
      return app.port;
    } catch (e) {
      if (signal?.aborted) throw new JobAborted("aborted");
      throw new JobFailure("deploy", output.reason(`start failed: ${(e as Error).message}`), e instanceof SmokeWindowFailure ? "smoke" : "start");
    } finally {
      launching.delete(id);
      launchOutput.delete(id);
    }
  };

  const removeWorkDir = (id: string) => rmSync(workDirOf(workRoot, id), { recursive: true, force: true });

  async function runJob(claimed: RunnerDeployment, abort: AbortController): Promise<void> {
    const id = claimed.id;
    const renew = setInterval(() => void renewOne(id), RENEW_MS);
    let job: JobContext | undefined;
    try {
      job = await control.job(id);
      if (!job) return;
      masks.set(id, [...job.secrets]);
      // The first system line says what confines the build (and warns when nothing does).
      system(job.d, "build", deps.sandbox.describe());
      const plan = await buildDeployment(
        job,
        {
          workRoot,
          sandbox: deps.sandbox,
          uid: await uidOf(job),
          cacheDir: cacheDirOf(deps.dataDir, job.d.projectId),
          buildEnv: settings.buildEnv,
          allowPrivate: deps.allowPrivate,
          gitHosts: deps.gitHosts,
          openSource: (id, key) => control.openSource(id, key),
          buildTimeoutMs: settings.buildTimeoutMs,
          cloneToken: (j) => control.cloneCredential(j.d.id),
          log,
          mask: (text) => mask(id, text),
          skipped: (id, lines) => limiter.skipped(id, lines),
        },
        abort.signal,
      );
      await control.flushLogs();
      if (!(await control.advance(id, ["building"], "deploying"))) throw new JobAborted("no longer ours");
      system(job.d, "build", "Starting the app");
      const port = await launch(job, plan, abort.signal);
      await control.setServing(id, port);
      const previous = await control.currentOf(job.d.environmentId);
      // The line goes in before the status: a build-log stream ends once it reads `ready` and must have seen every line.
      system(job.d, "build", `Ready: the app answers on port ${port}`);
      await control.flushLogs();
      const ready = await control.markReady(id);
      if (previous && previous.id !== id && supervisor.running().some((a) => a.deploymentId === previous.id)) {
        // Every edge (this process's and other adapters') switches within EDGE_SWITCH_MS of the commit: only then does the old app stop.
        await sleep(EDGE_SWITCH_MS);
        await supervisor.stop(previous.id);
        await control.clearServing(previous.id);
      }
      await emit(ready, "deploy.succeeded", `Deployed to ${job.environment.name}`, `${job.project.name}: deployment ${id} is live`);
      await prune(job.d.environmentId);
      await recordWorkDirUsage({ record: (id, bytes) => control.recordWorkDirBytes(id, bytes), logger: deps.logger }, id, workDirOf(workRoot, id));
    } catch (e) {
      if (supervisor.running().some((a) => a.deploymentId === id)) await supervisor.stop(id).catch(() => {});
      if (e instanceof JobAborted || abort.signal.aborted) {
        if (stopping) {
          system(claimed, "build", "The server is stopping: the deployment goes back to the queue");
          await control.flushLogs();
          await control.release(id);
        } else {
          system(claimed, "build", "Canceled");
          await control.flushLogs();
          removeWorkDir(id);
          await control.discardSource(id);
        }
        return;
      }
      const failure = e instanceof JobFailure ? e : new JobFailure("deploy", `internal error: ${(e as Error).message}`);
      if (!(e instanceof JobFailure)) deps.logger.error("runner_job_failed", { deploymentId: id, error: (e as Error).message });
      const reason = mask(id, failure.message);
      system(claimed, "build", `Failed: ${reason.split("\n")[0]}`);
      await control.flushLogs();
      const failed = await control.advance(id, ["building", "deploying"], "failed", reason);
      removeWorkDir(id);
      await control.discardSource(id);
      if (failed) {
        const name = job?.project.name ?? failed.projectId;
        // One event either way: a build.failed reaches deploy.failed subscribers too (categories.ts).
        if (failure.kind === "build") await emit(failed, "build.failed", "Build failed", `${name}: ${reason}`, { stage: failure.stage });
        else await emit(failed, "deploy.failed", "Deploy failed", `${name}: ${reason}`, { stage: failure.stage });
      }
    } finally {
      clearInterval(renew);
      if (!supervisor.running().some((a) => a.deploymentId === id)) masks.delete(id);
    }
  }

  async function renewOne(id: string) {
    const job = jobs.get(id);
    if (!job || job.abort.signal.aborted) return;
    try {
      if (!(await control.renew(id))) job.abort.abort();
    } catch (error) {
      deps.logger.error("runner_renew_failed", { deploymentId: id, error: (error as Error).message });
    }
  }

  async function prune(environmentId: string) {
    for (const id of await control.supersededBeyond(environmentId, KEEP_SUPERSEDED)) {
      if (supervisor.running().some((a) => a.deploymentId === id)) continue;
      // Recorded first: a promote of it is refused from now on (its build is going).
      await control.markPruned(id);
      removeWorkDir(id);
      await control.discardSource(id);
    }
  }

  function pump(): Promise<void> {
    if (pumping) {
      pumpAgain = true;
      return pumping;
    }
    pumping = (async () => {
      do {
        pumpAgain = false;
        while (!stopping && jobs.size < settings.concurrency) {
          const d = await control.claim();
          if (!d) break;
          const abort = new AbortController();
          const job: Job = { d, abort, done: Promise.resolve() };
          jobs.set(d.id, job);
          job.done = runJob(d, abort)
            .catch((error) => deps.logger.error("runner_job_crashed", { deploymentId: d.id, error: (error as Error).message }))
            .finally(() => {
              jobs.delete(d.id);
              if (!stopping) void pump();
            });
        }
      } while (pumpAgain && !stopping);
      lastTick = new Date();
    })()
      .catch((error) => deps.logger.error("runner_claim_failed", { error: (error as Error).message }))
      .finally(() => {
        pumping = undefined;
      });
    return pumping;
  }

  /** Launches what should run here and is not running; stops what runs here and should not. */
  function reconcile(): Promise<void> {
    if (reconciling) {
      reconcileAgain = true;
      return reconciling;
    }
    reconciling = (async () => {
      do {
        reconcileAgain = false;
        await reconcileOnce();
      } while (reconcileAgain && !stopping);
      lastTick = new Date();
    })()
      .catch((error) => deps.logger.error("runner_reconcile_failed", { error: (error as Error).message }))
      .finally(() => {
        reconciling = undefined;
      });
    return reconciling;
  }

  async function reconcileOnce() {
    if (stopping) return;
    // Sleep mode changed to always_on: sleeping apps wake (and are launched below).
    await control.wakeAlwaysOn();
    const running = new Set(supervisor.running().map((a) => a.deploymentId));
    for (const d of await control.toServe()) {
      if (stopping) return;
      if (running.has(d.id) || launching.has(d.id) || jobs.has(d.id) || givingUp.has(d.id)) continue;
      if ((restoreRetries.get(d.id)?.at ?? 0) > Date.now()) continue;
      await restore(d);
    }
    const others = supervisor
      .running()
      .map((a) => a.deploymentId)
      .filter((id) => !launching.has(id) && !jobs.has(id));
    const keep = new Set(await control.stillServing(others));
    const retired = others.filter((id) => !keep.has(id));
    // As after a deploy: the edges move to the new current app before the old one stops.
    if (retired.length > 0) await sleep(EDGE_SWITCH_MS);
    for (const id of retired) {
      if (stopping) continue;
      await supervisor.stop(id);
      await control.clearServing(id);
      if (!launching.has(id)) masks.delete(id);
    }
    await sleepIdle(others.filter((id) => keep.has(id)));
  }

  /**
   * Sleep mode: a running app of an `auto_sleep` project idle for SLEEP_AFTER is
   * marked asleep first (its port cleared, so edges hold new requests and wake
   * it), then stopped; a wake clears the mark and the next reconcile, which runs
   * after this one, launches it again.
   */
  async function sleepIdle(ids: string[]) {
    const cutoff = new Date(now().getTime() - settings.sleepAfterMs);
    for (const id of await control.idle(ids, cutoff)) {
      if (stopping) return;
      const d = await control.setAsleep(id, cutoff);
      if (!d) continue;
      system(d, "runtime", `Asleep: no request for ${Math.round(settings.sleepAfterMs / 1000)} s (SLEEP_AFTER); the next request wakes it`);
      await supervisor.stop(id);
    }
  }

  /** Launches a ready deployment from its work directory (no rebuild); a failure marks it crashed. */
  /**
   * Launches a ready deployment from its work directory (no rebuild; no smoke
   * window: it went live once already). A failure is retried on
   * RESTORE_RETRY_MS's schedule, each time saying why and when the next try is;
   * after the last one (or at once when its build is gone) it is marked crashed.
   */
  async function restore(d: RunnerDeployment) {
    const path = planPathOf(workDirOf(workRoot, d.id));
    const fail = async (reason: string) => {
      restoreRetries.delete(d.id);
      system(d, "runtime", reason);
      await control.flushLogs();
      const row = await control.setCrashed(d.id);
      if (row) await emit(row, "service.crashed", "Service crashed", `Deployment ${d.id} could not be started: ${reason}`);
    };
    if (!existsSync(path)) return fail("The deployment's build is no longer on this server (pruned or removed): redeploy it");
    const job = await control.job(d.id);
    if (!job) return;
    masks.set(d.id, [...job.secrets]);
    const tried = restoreRetries.get(d.id)?.tries ?? 0;
    system(d, "runtime", tried === 0 ? "Starting the app (restore)" : `Starting the app (restore, try ${tried + 1} of ${RESTORE_RETRY_MS.length + 1})`);
    try {
      const plan = JSON.parse(readFileSync(path, "utf8")) as Plan;
      const port = await launch(job, plan, undefined, { smokeWindow: false });
      await control.setServing(d.id, port);
      restoreRetries.delete(d.id);
    } catch (e) {
      masks.delete(d.id);
      const reason = (e as Error).message;
      const wait = RESTORE_RETRY_MS[tried];
      if (wait === undefined) return fail(`The app could not be started after ${tried + 1} tries: ${reason}`);
      restoreRetries.set(d.id, { tries: tried + 1, at: Date.now() + wait });
      deps.logger.error("app_start_failed", { deploymentId: d.id, projectId: d.projectId, reason, nextTryInMs: wait });
      system(d, "runtime", `The app could not be started: ${reason}. Next try in ${formatDuration(wait)} (try ${tried + 2} of ${RESTORE_RETRY_MS.length + 1})`);
    }
  }

  /** Work directories of deployments that failed, were canceled or are gone (left by a crash of the server). */
  async function sweepWorkDirs() {
    if (!existsSync(workRoot)) return;
    const ids = readdirSync(workRoot).filter((n) => /^[a-z]+_[0-9a-z]+$/.test(n));
    const statuses = await control.statuses(ids);
    for (const id of ids) {
      const status = Object.hasOwn(statuses, id) ? statuses[id] : undefined;
      if (!status || status === "failed" || status === "canceled") removeWorkDir(id);
    }
  }

  return {
    id: runnerId,
    supervisor,
    start() {
      if (started) return;
      started = true;
      // The work root is made by the first build (a server that never builds needs no DATA_DIR, e.g. on Postgres with WORKSPACE_OWNER_TOKEN).
      void Promise.all([sweepWorkDirs(), sweepCachesOf(deps.dataDir, (ids) => control.projectsAlive(ids)), control.forgetPorts()])
        .catch((error) => deps.logger.error("runner_sweep_failed", { error: (error as Error).message }))
        .then(() => reconcile())
        .then(() => pump());
      pollTimer = setInterval(() => void pump(), POLL_MS);
      reconcileTimer = setInterval(() => void reconcile(), RECONCILE_MS);
      reportTimer = setInterval(reportDropped, REPORT_MS / 5);
    },
    wake() {
      if (!started || stopping) return;
      for (const id of jobs.keys()) void renewOne(id);
      void pump();
      void reconcile();
    },
    async stop() {
      if (stopping) return;
      stopping = true;
      clearInterval(pollTimer);
      clearInterval(reconcileTimer);
      clearInterval(reportTimer);
      await pumping;
      for (const job of jobs.values()) job.abort.abort();
      await Promise.all([...jobs.values()].map((j) => j.done));
      await reconciling;
      await supervisor.stopAll();
      await control.flushLogs();
    },
    active: () => [...jobs.keys(), ...launching],
    lastTickAt: () => lastTick,
  };
}
