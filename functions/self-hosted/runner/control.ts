/**
 * What the runner needs from the control plane, as one interface: the runner's
 * core (runner.ts, pipeline.ts, the supervisor behind it) talks to nothing else.
 * One core, two transports: the adapter's in-process runner implements it on
 * the database (db-control.ts); a runner on another machine will implement it
 * over HTTP with a runner token. No second copy of the pipeline or supervisor.
 *
 * Every argument and result is plain data (strings, numbers, booleans, arrays,
 * records; Dates travel as ISO 8601 strings): no database handle, keyring or
 * stored row crosses it. The runner's own id is bound when a control is made
 * (the database one is given it; over HTTP the token names the runner), so no
 * method takes it. Timestamps of what is recorded are the control plane's.
 *
 * What a transport must guarantee, method by method, is said on each; in
 * general: every write that names a job holds only while the runner still holds
 * its lease (claimedBy = this runner, status building/deploying), or for serving
 * state while the deployment is served by this runner; a write that no longer
 * holds is a no-op or answers "not yours" (undefined/false), never an error the
 * runner would retry; and every write is safe to repeat (a retried request after
 * a lost answer changes nothing more).
 */
import type { DeploymentRow, DeploymentStatus } from "../../deployments/store";
import type { NewLogLine } from "../../logs/store";
import type { ProjectRow } from "../../projects/store";

/** A deployment as the runner sees it: what to build, where it belongs, its state. */
export type RunnerDeployment = Pick<
  DeploymentRow,
  | "id"
  | "orgId"
  | "projectId"
  | "environmentId"
  | "status"
  | "current"
  | "source"
  | "artifactKey"
  | "gitProvider"
  | "gitOwner"
  | "gitRepo"
  | "commitSha"
  | "branch"
  | "services"
  | "createdBy"
>;

/** The project's name, resources and options as the deployment pinned them. */
export type RunnerProject = Pick<
  ProjectRow,
  "id" | "orgId" | "name" | "options" | "diskGb" | "buildMemoryMb" | "buildCpuCores" | "productionMemoryMb" | "productionCpuCores"
>;

export interface JobContext {
  d: RunnerDeployment;
  /** The project, its resources and options as the deployment pinned them when queued (the live ones for a deployment queued before snapshots). */
  project: RunnerProject;
  environment: { id: string; name: string; kind: string };
  /** The deployment's variables (its snapshot), secrets decrypted: held in memory only, never written or logged. */
  env: Record<string, string>;
  /** The secret values among them, for masking log lines. */
  secrets: string[];
  /** Compose services' own environment values, per service name (decrypted; masked like secrets). */
  serviceValues: Record<string, Record<string, string>>;
}

/** An uploaded or local-folder source: its archive, or why there is none. */
export type SourceArchive = { body: ReadableStream<Uint8Array> } | { missing: "no-store" | "gone" };

/** A notification event about a deployment (deploy.succeeded, build.failed, service.crashed, ...). */
export interface RunnerEvent {
  orgId: string;
  projectId: string;
  category: string;
  title: string;
  message: string;
  data: Record<string, unknown>;
}

export interface RunnerControl {
  // The queue and the lease.

  /**
   * Takes the oldest claimable deployment (queued, or working under a lease that
   * ran out) for this runner, now `building` under a fresh lease; undefined when
   * none. Over HTTP: one job or nothing (a long poll may wait); two runners never
   * get the same job, and a job whose answer was lost is found again by its
   * lease running out.
   */
  claim(): Promise<RunnerDeployment | undefined>;
  /** Pushes the job's lease on; false when it is no longer this runner's to work on (canceled, finished, taken over): the job aborts. Idempotent. */
  renew(id: string): Promise<boolean>;
  /**
   * Moves this runner's job from one of `from` to `to` (recorded, with the
   * failure reason when failed); undefined when it is no longer ours or in
   * another state (canceled meanwhile): the runner stops. A repeat after the
   * move answers undefined and records nothing.
   */
  advance(
    id: string,
    from: DeploymentStatus[],
    to: Exclude<DeploymentStatus, "ready" | "queued">,
    failureReason?: string,
  ): Promise<RunnerDeployment | undefined>;
  /** The app answers: the job is `ready` and its environment's current deployment (the previous one no longer is). */
  markReady(id: string): Promise<RunnerDeployment>;
  /** The runner stops: its unfinished job goes back to the queue (recorded), unclaimed. A no-op when no longer ours. */
  release(id: string): Promise<void>;

  // What a job needs.

  /** The deployment with its pinned project and its variables decrypted; only for the job's holder over HTTP, and never logged. */
  job(id: string): Promise<JobContext | undefined>;
  /**
   * What a git deployment clones with, or null: the user's forwarded git credential when
   * `wsp deploy` sent one (git identity forwarding: taken, so deleted, by this read; keep it for
   * this clone only), else the clone token (decrypted). Over HTTP valid only while the lease is.
   */
  cloneCredential(id: string): Promise<CloneCredential | null>;
  /** The archive of an upload or local deployment (over HTTP: fetched from a short-lived download URL). Opened once to scan, once to unpack. */
  openSource(id: string, artifactKey: string): Promise<SourceArchive>;
  /** The job's source archive is no longer needed (failed, canceled, pruned): removed from the store. Idempotent; never throws. */
  discardSource(id: string): Promise<void>;
  /** The sandbox uid of a project (allocated at its first deployment, within `range`). */
  sandboxUid(project: { id: string; orgId: string }, range: { first: number; last: number }): Promise<number>;
  /** A kept work directory's size, counted against the organization's quota. Idempotent (the last value holds). */
  recordWorkDirBytes(id: string, bytes: number): Promise<void>;
  /** Which of `projectIds` still exist (build caches of the others are removed). */
  projectsAlive(projectIds: string[]): Promise<string[]>;

  // Logs and events.

  /** Stores one line (batched; masked by the runner before). Over HTTP: batches in order, idempotent by sequence. */
  log(line: NewLogLine): void;
  /** Every line given to log() so far is stored (a status a log reader waits on is recorded after its lines). */
  flushLogs(): Promise<void>;
  /** Records a notification event and wakes its deliveries. */
  emit(event: RunnerEvent): Promise<void>;

  // Serving state: which app listens where (the edges' route table reads it).

  /** The app of `id` answers on `port` here. Recorded before it is made current, so a reader of the current deployment always finds its port. */
  setServing(id: string, port: number): Promise<void>;
  /** The runner (re)started: the ports its previous run recorded are forgotten (those apps are gone). */
  forgetPorts(): Promise<void>;
  /** The app crashed and is restarting: no port until setServing, so edges hold its requests. Only for an app served by this runner. */
  recordDown(id: string): Promise<void>;
  /** The app stopped here (no longer current, or pruned): its port is cleared when it is not current. */
  clearServing(id: string): Promise<void>;
  /** The app was given up (crash loop, disk limit, could not be restored): it stays the record but no longer serves. */
  setCrashed(id: string): Promise<RunnerDeployment | undefined>;
  /** An idle app goes to sleep, if it still is idle since `cutoff` (a request meanwhile keeps it awake); the deployment when it did. */
  setAsleep(id: string, cutoff: Date): Promise<RunnerDeployment | undefined>;
  /** The current deployment of an environment (the one a new one replaces). */
  currentOf(environmentId: string): Promise<RunnerDeployment | undefined>;

  // autoRollback.

  /** The environment's name and whether it rolls back on its own. */
  environment(environmentId: string): Promise<{ name: string; autoRollback: boolean } | undefined>;
  /** The newest ready deployment older than `crashed`, kept by this runner, that never crashed. */
  rollbackTarget(crashed: { id: string; environmentId: string }): Promise<RunnerDeployment | undefined>;
  /** Makes a ready deployment current again; throws with a reason a person can read when it cannot be. */
  promote(orgId: string, id: string): Promise<void>;

  // The reconcile loop's reads (and its two writes).

  /** Sleeping deployments of always_on projects served here wake; how many. */
  wakeAlwaysOn(): Promise<number>;
  /** Current, ready, not crashed, awake deployments served by this runner: what must run here. */
  toServe(): Promise<RunnerDeployment[]>;
  /** Which of `ids` (apps running here) are still current and not crashed. */
  stillServing(ids: string[]): Promise<string[]>;
  /** Which of `ids` are current deployments of auto_sleep projects idle since `cutoff`. */
  idle(ids: string[], cutoff: Date): Promise<string[]>;
  /** Ready, not current deployments of the environment kept by this runner beyond the newest `keep`: their builds may go. */
  supersededBeyond(environmentId: string, keep: number): Promise<string[]>;
  /** The build of `id` is being removed: it can no longer be promoted. Idempotent. */
  markPruned(id: string): Promise<void>;
  /** The status of each of `ids` that exists (work directories of the others, and of failed or canceled ones, are removed). */
  statuses(ids: string[]): Promise<Record<string, DeploymentStatus>>;
}

/** A clone token (sent in its provider's documented form), or a forwarded credential (sent as it is). */
export type CloneCredential = { token: string } | { username: string; password: string };
