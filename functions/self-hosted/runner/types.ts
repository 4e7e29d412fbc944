/**
 * The seams of the self-hosted runner. The pipeline (pipeline.ts) turns a claimed
 * deployment into a built work directory and an AppSpec; the supervisor
 * (supervisor.ts) runs AppSpecs: starts their processes, waits until they answer
 * HTTP, restarts crashed ones with backoff, stops them with a grace period.
 */
import type { NewLogLine } from "../../logs/store";
import type { Jail, JailInput } from "./sandbox/sandbox";

/** One process of an app: the web process, or one compose service. */
export interface ProcessSpec {
  /** "web", or the compose service's name. */
  name: string;
  /** A shell command line, run with `/bin/sh -c` in its own process group. */
  command: string;
  /** Absolute, inside the deployment's work directory. */
  cwd: string;
  /** The whole environment of the process (the server's own environment is not inherited). PORT is added by the supervisor for the web process. */
  env: Record<string, string>;
  /** Whether the supervisor waits for this process to answer HTTP on its PORT (the web process). */
  http: boolean;
}

export type AppSpec = {
  deploymentId: string;
  orgId: string;
  projectId: string;
  environmentId: string;
  /** The project's healthCheckPath: the check then needs a 2xx or 3xx answer there; undefined: any answer to `/`. */
  healthPath?: string;
  /** Memory limit in MiB of each process (its cgroup; the sampling watchdog where no memory cgroup is writable, see processes.ts); undefined: none. */
  memoryMb?: number;
} & (
  | {
      kind: "processes";
      processes: ProcessSpec[];
      /** The sandbox every process runs in: the project's uid, the work directory it sees, the CPU and disk limits. */
      confinement?: { uid: number; workDir: string; cacheDir?: string; cpuCores?: number; diskGb?: number };
    }
  /** A static site: the adapter serves this directory itself (no process); `base` is the source it must stay inside. */
  | { kind: "static"; dir: string; base?: string }
);

export interface LaunchOptions {
  signal?: AbortSignal;
  /** false: no smoke window (an app that went live before: restored at start, promoted back). Default true. */
  smokeWindow?: boolean;
}

export interface RunningApp {
  deploymentId: string;
  /** The loopback port the app (or the static server) answers on. */
  port: number;
}

export interface Supervisor {
  /**
   * Starts the app and resolves once it answers HTTP on its port (any status), or
   * rejects with a reason a person can act on (exited with code N, did not answer
   * within the health timeout) after stopping whatever it started.
   */
  launch(spec: AppSpec, options?: LaunchOptions): Promise<RunningApp>;
  /** Stops one app: SIGTERM to its process groups, SIGKILL after the grace period. Unknown ids are a no-op. */
  stop(deploymentId: string): Promise<void>;
  /** Stops every app (server shutdown). */
  stopAll(): Promise<void>;
  /** The apps running now. */
  running(): RunningApp[];
}

/** Where the supervisor sends an app's output and what it reports. */
export interface SupervisorDeps {
  /** Stores (batched) one line; false when it was dropped over the log limit (the process is then throttled). */
  log(line: NewLogLine): boolean;
  /** Lines of the deployment skipped unread over the log limit. */
  skipped?(deploymentId: string, lines: number): void;
  healthTimeoutMs: number;
  /** SMOKE_WINDOW: how long a new app must stay up after its first health check before the launch resolves (0 or absent: none). */
  smokeWindowMs?: number;
  /** Grace period between SIGTERM and SIGKILL. */
  stopGraceMs: number;
  /** Called after each automatic restart of a crashed app, with the attempt number. */
  onRestart?(spec: AppSpec, attempt: number, reason: string): void;
  /** Called when an app crashed more often than the policy allows (5 times in 10 minutes) and was given up. */
  onGiveUp?(spec: AppSpec, reason: string): void;
  /** The crash-restart policy; defaults in supervisor.ts (1 s doubling to 30 s, 5 restarts in 10 minutes). Tests shorten it. */
  restart?: RestartPolicy;
  /** The jail of one app process (sandbox/sandbox.ts); absent or undefined: unconfined. */
  jail?: (input: JailInput) => Promise<Jail | undefined>;
  /** A launched app's web process crashed: nothing answers until onUp. */
  onDown?(spec: AppSpec, reason: string): void;
  /** After a crash, the restarted app passes its health check again, on `port` (a new one when its own was taken meanwhile). */
  onUp?(spec: AppSpec, port: number): void;
  /** Called when a running app went over its disk limit and was stopped (the runner records it like a give-up). */
  onDiskExceeded?(spec: AppSpec, reason: string): void;
}

export interface RestartPolicy {
  /** Delay before the first restart; each further restart in the window doubles it. Default 1000. */
  baseDelayMs?: number;
  /** Cap of the delay. Default 30000. */
  maxDelayMs?: number;
  /** Restarts allowed within windowMs; the next crash gives the app up. Default 5. */
  maxRestarts?: number;
  /** Default 600000 (10 minutes). */
  windowMs?: number;
}
