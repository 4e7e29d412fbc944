/**
 * RunnerControl (control.ts) on the database: the adapter's in-process runner
 * reaches the control plane through today's store functions (store.ts), the
 * batching log writer, the upload store and the keyring, all held here, and
 * gets plain data back (rows mapped to RunnerDeployment, JobContext).
 */
import type { Keyring } from "../../../shared/crypto/keyring";
import { projects } from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";
import type { Logger } from "../../../shared/http/logger";
import type { UploadStorage } from "../../../shared/storage/types";
import { inArray } from "drizzle-orm";
import { discardArtifact, recordWorkDirBytes } from "../../deployments/artifacts";
import { type DeploymentRow, markReady, promoteDeployment } from "../../deployments/store";
import type { LogWriter } from "../../logs/writer";
import { emitNotificationEvent } from "../../notifications/fanout";
import { autoRollbackOf } from "../../projects/environments-store";
import { cloneCredentialOfJob, sweepForwardedCredentials } from "../../servers/job-credentials";
import type { RunnerControl } from "./control";
import { cloneCredentialOf, jobContext, runnerDeployment } from "./job-context";
import { sandboxUidOf } from "./sandbox/uids";
import {
  advance,
  claimNext,
  clearServing,
  currentOf,
  deploymentStatuses,
  deploymentsToServe,
  environmentOf,
  forgetPorts,
  idleDeployments,
  markPruned,
  recordDown,
  releaseJob,
  renewLease,
  rollbackTarget,
  setAsleep,
  setCrashed,
  setServing,
  stillServing,
  supersededBeyond,
  wakeAlwaysOn,
} from "./store";

export interface DbControlDeps {
  db: Db;
  keyring: Keyring;
  /** The upload store (upload and local sources); absent: such a deployment fails with a reason. */
  uploads?: UploadStorage;
  writer: LogWriter;
  logger: Logger;
  /** The runner's id (RUNNER_ID): claims, leases and serving state are recorded under it. */
  runnerId: string;
  /** Wakes the notification deliveries after an event. */
  wakeDeliveries: () => void;
  /** Wakes the project's open log streams: a deployment that finished ends its build-log stream now, not at the stream's next poll. */
  wakeStreams?: (projectId: string) => void;
  clock?: () => Date;
}

const mapped = (d: DeploymentRow | undefined) => (d ? runnerDeployment(d) : undefined);

export function createDbControl(deps: DbControlDeps): RunnerControl {
  const { db, keyring, runnerId } = deps;
  const now = deps.clock ?? (() => new Date());
  const settled = <T extends { projectId: string } | undefined>(d: T): T => {
    if (d) deps.wakeStreams?.(d.projectId);
    return d;
  };
  return {
    claim: async () => {
      // Forwarded git credentials of ended or expired jobs go with each claim (the runner polls: they never outlive their job for long).
      await sweepForwardedCredentials(db, now()).catch((error) => deps.logger.error("job_credentials_sweep_failed", { error: (error as Error).message }));
      return mapped(await claimNext(db, runnerId, now()));
    },
    renew: (id) => renewLease(db, id, runnerId, now()),
    advance: async (id, from, to, failureReason) => settled(mapped(await advance(db, id, runnerId, from, to, now(), failureReason))),
    markReady: async (id) => settled(runnerDeployment(await markReady(db, id, now()))),
    release: (id) => releaseJob(db, id, runnerId, now()),

    job: (id) => jobContext(db, keyring, id),
    // The forwarded git credential (taken: deleted by this read), else the clone token.
    cloneCredential: (id) => cloneCredentialOfJob(db, keyring, id, undefined, now(), () => cloneCredentialOf(db, keyring, id)),
    async openSource(_id, artifactKey) {
      if (!deps.uploads) return { missing: "no-store" };
      const opened = await deps.uploads.open(artifactKey);
      return opened ? { body: opened.body } : { missing: "gone" };
    },
    async discardSource(id) {
      await discardArtifact({ db, uploads: deps.uploads, logger: deps.logger }, id);
    },
    sandboxUid: (project, range) => sandboxUidOf(db, project, range),
    recordWorkDirBytes: (id, bytes) => recordWorkDirBytes(db, id, bytes),
    async projectsAlive(projectIds) {
      if (projectIds.length === 0) return [];
      return (await db.select({ id: projects.id }).from(projects).where(inArray(projects.id, projectIds))).map((r) => r.id);
    },

    log: (line) => deps.writer.write(line),
    flushLogs: () => deps.writer.flush(),
    async emit(event) {
      await emitNotificationEvent(db, event, now());
      deps.wakeDeliveries();
    },

    setServing: (id, port) => setServing(db, id, runnerId, port, now()),
    forgetPorts: () => forgetPorts(db, runnerId),
    recordDown: (id) => recordDown(db, id, runnerId),
    clearServing: (id) => clearServing(db, id, runnerId),
    setCrashed: async (id) => mapped(await setCrashed(db, id, now())),
    setAsleep: async (id, cutoff) => mapped(await setAsleep(db, id, runnerId, cutoff, now())),
    currentOf: async (environmentId) => mapped(await currentOf(db, environmentId)),

    async environment(environmentId) {
      const env = await environmentOf(db, environmentId);
      return env ? { name: env.name, autoRollback: autoRollbackOf(env) } : undefined;
    },
    rollbackTarget: async (crashed) => mapped(await rollbackTarget(db, crashed, runnerId)),
    async promote(orgId, id) {
      await promoteDeployment(db, orgId, id, now());
    },

    wakeAlwaysOn: () => wakeAlwaysOn(db, runnerId),
    toServe: async () => (await deploymentsToServe(db, runnerId)).map(runnerDeployment),
    stillServing: async (ids) => [...(await stillServing(db, ids))],
    idle: (ids, cutoff) => idleDeployments(db, ids, cutoff),
    supersededBeyond: (environmentId, keep) => supersededBeyond(db, environmentId, runnerId, keep),
    markPruned: (id) => markPruned(db, id, now()),
    statuses: async (ids) => Object.fromEntries(await deploymentStatuses(db, ids)),
  };
}
