/**
 * The build half of the runner: a claimed deployment → a work directory with the
 * source, installed and built, and its Plan (commands.ts). Every step runs in its
 * own sandbox through processes.ts; its output becomes `build` log lines,
 * with `system` lines saying what runs and how it ended.
 *
 * Work directories: DATA_DIR/deployments/<deploymentId>/ (0700, the server's)
 * holding `src/` (the source; /app in the sandbox), `home/` (HOME of every step
 * and of the app; /home/app), both owned
 * by the project's sandbox uid, and, the server's alone, `plan.json` and the
 * sandbox's passwd/group files. Decrypted values never go to disk: the plan has
 * commands and paths only; the environment is rebuilt from the database at
 * every launch. Every step runs in the sandbox (sandbox/sandbox.ts) with the
 * build's limits (build memory and CPU, diskGb checked every few seconds), and
 * the project's build cache (npm's and Node's, build-cache.ts) as ~/.cache.
 *
 * Sources:
 * - git: fetched in the sandbox through the outbound guard, the credential on a
 *   pipe (git-source.ts).
 * - upload: the artifact from the upload store, checked by the scan's reader,
 *   then unpacked (unpack.ts) and given to the project's uid.
 * - local: the folder's snapshot taken when queued (an artifact in the upload
 *   store, like an upload's), unpacked the same way.
 */
import { lstatSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { GitHosts } from "../../../shared/git/hosts";
import { nodeGunzip } from "../../../shared/storage/gunzip-node";
import { SCAN_LIMITS } from "../../../shared/storage/limits";
import { humanSize } from "../../cli/progress";
import type { NewLogLine } from "../../logs/store";
import { readArchive } from "../../projects/folder/tar-reader";
import { readyCache } from "./build-cache";
import { inside, type Plan, PlanError, planOf } from "./commands";
import { createFailureDigest } from "./failure-reason";
import { fetchGit } from "./git-source";
import { JobAborted, JobFailure, type Step } from "./step";
import { spawnProcess } from "./processes";
import { DISK_BUILD_CHECK_MS, formatGb, watchDisk } from "./sandbox/disk";
import type { ProcessLimits, Sandbox } from "./sandbox/sandbox";
import type { CloneCredential, JobContext, SourceArchive } from "./control";
import { extractArchive } from "./unpack";

export { JobAborted, JobFailure } from "./step";

export const workDirOf = (root: string, deploymentId: string) => join(root, deploymentId);
export const planPathOf = (workDir: string) => join(workDir, "plan.json");

/** "15 min", "90 s", "1.5 s": how settings and step times are shown. */
export function formatDuration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 10_000) return `${Math.round(ms / 1000)} s`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** npm must not ask the internet about updates, funding or audits during a build. */
const QUIET_NPM = { npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false", CI: "1" };

export interface BuildDeps {
  /** DATA_DIR/deployments */
  workRoot: string;
  gitHosts: GitHosts;
  /** An upload's or local snapshot's archive (RunnerControl.openSource). */
  openSource: (deploymentId: string, artifactKey: string) => Promise<SourceArchive>;
  buildTimeoutMs: number;
  /** The clone credential that applies (decrypted in memory; a forwarded one already deleted at the source), or null. */
  cloneToken: (job: JobContext) => Promise<CloneCredential | null>;
  /** A log line of this deployment (the caller masks secrets and batches). */
  log: (line: NewLogLine) => boolean;
  /** The deployment's secret values masked in a text: a failure reason quotes the step's lines, and is cut to its size after that. */
  mask: (text: string) => string;
  /** Lines skipped unread over the log limit. */
  skipped?: (deploymentId: string, lines: number) => void;
  sandbox: Sandbox;
  /** The project's sandbox uid. */
  uid: number;
  /** The project's build cache (build-cache.ts). */
  cacheDir: string;
  /** BUILD_ENV_PASSTHROUGH's values: proxy, CA and registry settings of the server that builds (and the fetch) need. */
  buildEnv: Record<string, string>;
  /** OUTBOUND_ALLOW_PRIVATE: whether the git host may be a private or loopback address. */
  allowPrivate: boolean;
}

/** Builds a claimed deployment; resolves with its plan, or throws JobFailure / JobAborted. */
export async function buildDeployment(job: JobContext, deps: BuildDeps, signal: AbortSignal): Promise<Plan> {
  const { d } = job;
  const workDir = workDirOf(deps.workRoot, d.id);
  const started = Date.now();
  const deadline = started + deps.buildTimeoutMs;
  const line = (stream: NewLogLine["stream"], message: string) =>
    deps.log({ orgId: d.orgId, projectId: d.projectId, deploymentId: d.id, kind: "build", stream, at: new Date(), message });
  const system = (message: string) => line("system", message);

  const diskBytes = job.project.diskGb * 1024 ** 3;
  const limits: ProcessLimits = { memoryMb: job.project.buildMemoryMb, cpuCores: job.project.buildCpuCores, diskBytes };
  let steps = 0;
  let diskExceeded: number | undefined;
  let current: { stop(graceMs: number): Promise<unknown> } | undefined;

  /** Runs one step; a non-zero exit, the timeout, the disk limit or an abort throws. */
  const step = async (label: string, command: string, cwd: string, env: Record<string, string>, opts: { shown?: string; secret?: string } = {}) => {
    if (signal.aborted) throw new JobAborted("aborted");
    system(`Running ${opts.shown ?? command}`);
    const t0 = Date.now();
    // Every line the step prints, lines over the log limit included: the reason quotes its first error lines and its last lines.
    const output = createFailureDigest();
    const memoryMb = limits.memoryMb;
    const proc = spawnProcess({
      command,
      cwd,
      env,
      memoryMb,
      jail: await deps.sandbox.jail({ name: `${d.id}.${++steps}`, uid: deps.uid, workDir, cacheDir: deps.cacheDir, limits }),
      secret: opts.secret,
      onLine: (stream, text) => {
        output.add(deps.mask(text));
        return line(stream === "stderr" ? "stderr" : "stdout", text);
      },
      onSkipped: (lines) => deps.skipped?.(d.id, lines),
    });
    let timedOut = false;
    const remaining = deadline - Date.now();
    const timer = setTimeout(
      () => {
        timedOut = true;
        void proc.stop(0);
      },
      Math.max(0, remaining),
    );
    const onAbort = () => void proc.stop(0);
    signal.addEventListener("abort", onAbort, { once: true });
    current = proc;
    const exit = await proc.exited.finally(() => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    });
    // Whatever the step left behind in its process group ends with it.
    void proc.stop(0);
    const took = formatDuration(Date.now() - t0);
    if (signal.aborted) {
      system(`${label} stopped (canceled) after ${took}`);
      throw new JobAborted("aborted");
    }
    if (timedOut) {
      system(`${label} killed: the build timed out`);
      throw new JobFailure("build", `build timed out after ${formatDuration(deps.buildTimeoutMs)} (BUILD_TIMEOUT)`);
    }
    if (diskExceeded !== undefined) {
      system(`${label} killed: the work directory holds ${formatGb(diskExceeded)}`);
      throw new JobFailure("build", `disk limit (${job.project.diskGb} GB) exceeded: the build wrote ${formatGb(diskExceeded)} (resources diskGb)`);
    }
    if (exit.memoryExceeded) {
      system(`${label} killed: memory limit (${memoryMb} MiB) exceeded`);
      throw new JobFailure("build", `memory limit (${memoryMb} MiB) exceeded: ${label} was killed (resources build.memoryMb): ${opts.shown ?? command}`);
    }
    if (exit.error) throw new JobFailure("build", `${label} could not start: ${exit.error}`);
    const how = exit.code !== null ? `exit code ${exit.code}` : `signal ${exit.signal}`;
    system(`${how} in ${took}`);
    if (exit.code !== 0) throw new JobFailure("build", output.reason(`${label} failed (${how}): ${opts.shown ?? command}`));
  };

  rmSync(workDir, { recursive: true, force: true });
  mkdirSync(deps.workRoot, { recursive: true, mode: 0o700 });
  mkdirSync(workDir, { mode: 0o700 });
  const src = join(workDir, "src");
  await deps.sandbox.prepare(workDir, deps.uid);
  const cleared = await readyCache(deps.cacheDir, diskBytes / 2, deps.sandbox.confined ? deps.uid : undefined);
  if (cleared !== undefined) system(`Build cache emptied: it held ${formatGb(cleared)}, over half of the disk limit (${job.project.diskGb} GB)`);
  const base = deps.sandbox.baseEnv(workDir, deps.cacheDir);
  const stopDiskWatch = watchDisk([src, join(workDir, "home"), deps.cacheDir], diskBytes, DISK_BUILD_CHECK_MS, (used) => {
    diskExceeded = used;
    void current?.stop(0);
  });
  try {
    return await buildIn(job, deps, { workDir, src, base, step, system, line, started });
  } finally {
    stopDiskWatch();
  }
}

interface BuildContext {
  workDir: string;
  src: string;
  base: Record<string, string>;
  step: Step;
  system: (message: string) => void;
  line: (stream: NewLogLine["stream"], message: string) => void;
  started: number;
}

async function buildIn(job: JobContext, deps: BuildDeps, ctx: BuildContext): Promise<Plan> {
  const { d } = job;
  const { workDir, src, base, step, system, started } = ctx;

  // 1. Source.
  if (d.source === "git") await fetchGit(job, deps, src, base, step, system);
  else if (d.source === "upload" || d.source === "local") {
    await unpackUpload(job, deps, src, system);
    await deps.sandbox.chownTree(src, deps.uid);
  } else throw new JobFailure("build", `Unknown source ${d.source}`);

  // 2. Commands.
  let plan: Plan;
  try {
    plan = await planOf(src, job.project.options, d.services && Object.keys(d.services).length ? d.services : null);
  } catch (e) {
    if (e instanceof PlanError) throw new JobFailure("build", e.message);
    throw e;
  }
  system(`Detected ${plan.stack}${plan.kind === "static" ? " (static site)" : ""}`);

  // 3. Install and build, with the environment's variables (over the operator's passthrough) and the build limits.
  const buildEnv = { ...base, ...deps.buildEnv, ...QUIET_NPM, ...job.env };
  const steps = plan.kind === "static" ? [{ cwd: plan.appDir, install: plan.install, build: plan.build, name: "web" }] : plan.processes;
  const done = new Set<string>();
  for (const p of steps) {
    for (const [label, command] of [
      ["install", p.install],
      ["build", p.build],
    ] as const) {
      if (!command) continue;
      const key = `${p.cwd}\0${command}`;
      if (done.has(key)) continue;
      done.add(key);
      await step(steps.length > 1 ? `${label} of ${p.name}` : label, command, p.cwd, buildEnv);
    }
  }
  if (plan.kind === "static") {
    const shown = relative(plan.appDir, plan.dir) || ".";
    // Checked again now that the build ran: it may have made the output directory, or a link in its place.
    try {
      inside(plan.appDir, shown, "outputDirectory");
    } catch (e) {
      if (e instanceof PlanError) throw new JobFailure("build", e.message);
      throw e;
    }
    const info = lstatSync(plan.dir, { throwIfNoEntry: false });
    if (!info?.isDirectory()) throw new JobFailure("build", `The output directory ${plan.dir.slice(src.length + 1) || "."} does not exist after the build`);
  }
  writeFileSync(planPathOf(workDir), JSON.stringify(plan), { mode: 0o600 });
  system(`Build finished in ${formatDuration(Date.now() - started)}`);
  return plan;
}

async function unpackUpload(job: JobContext, deps: BuildDeps, src: string, system: (m: string) => void) {
  const key = job.d.artifactKey;
  const unavailable = "The deployment's uploaded source is not available on this server (no upload store)";
  const gone = "The deployment's uploaded source is gone from the upload store: upload it again";
  if (!key) throw new JobFailure("build", unavailable);
  const first = await deps.openSource(job.d.id, key);
  if ("missing" in first && first.missing === "no-store") throw new JobFailure("build", unavailable);
  system("Unpacking the uploaded source");
  if ("missing" in first) throw new JobFailure("build", gone);
  let root: string;
  try {
    root = (await readArchive(first.body, { limits: SCAN_LIMITS, manifestNames: new Set(), gunzip: nodeGunzip })).root;
  } catch (e) {
    await first.body.cancel().catch(() => {});
    throw new JobFailure("build", `The uploaded source was refused: ${(e as Error).message}`);
  }
  const second = await deps.openSource(job.d.id, key);
  if ("missing" in second) throw new JobFailure("build", gone);
  try {
    const { files, bytes } = await extractArchive(second.body, src, { root, limits: SCAN_LIMITS });
    system(`Unpacked ${files} file${files === 1 ? "" : "s"} (${humanSize(bytes)})`);
  } catch (e) {
    await second.body.cancel().catch(() => {});
    throw new JobFailure("build", `The uploaded source was refused: ${(e as Error).message}`);
  }
}
