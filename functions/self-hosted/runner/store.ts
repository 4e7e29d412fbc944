/**
 * The runner's SQL: the queue is the deployments table itself (DEPLOY.md).
 *
 * - claim: one `queued` row, or a `building`/`deploying` row whose lease ran out
 *   (its runner died: the job restarts from scratch, recorded as `queued` then
 *   `building`), taken with FOR UPDATE SKIP LOCKED so two runners never take the
 *   same row; the claimer's id and a lease go on the row.
 * - renew: pushes the lease on while the job works; it matches only a row still
 *   claimed by this runner and still building/deploying, so a cancel (or another
 *   runner that took an expired lease) shows up as "lost" and the job aborts.
 * - advance: a guarded status change (ours, in an expected state).
 * - release: on server stop, a job in flight goes back to `queued` (recorded) with
 *   no claim, so the next start, or another runner, builds it again at once.
 * - serving: where a ready app listens (served_by = runner id, port), crashed_at.
 */
import { and, asc, desc, eq, inArray, isNotNull, isNull, lt, ne, or, type SQL } from "drizzle-orm";
import type { Keyring } from "../../../shared/crypto/keyring";
import { deployments, environments, projects } from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";
import { pinnedVariables, withPinnedConfig } from "../../deployments/config-snapshot";
import { type DeploymentRow, type DeploymentStatus, transition } from "../../deployments/store";
import { decryptedEnv } from "../../projects/env-store";
import type { ProjectRow } from "../../projects/store";

/** How long a claim holds without renewal; the runner renews every LEASE_MS / 3. */
export const LEASE_MS = 30_000;

export const WORKING: DeploymentStatus[] = ["building", "deploying"];

/**
 * Claims the oldest claimable deployment for `runnerId` (now `building`), or undefined when none.
 * Only deployments placed on this instance (`placement = 'local'`, functions/deployments/placement.ts):
 * a build meant for a server is never taken here, not even when its runner's lease ran out.
 */
export async function claimNext(db: Db, runnerId: string, now: Date, leaseMs = LEASE_MS): Promise<DeploymentRow | undefined> {
  return claimWhere(db, runnerId, eq(deployments.placement, "local"), now, leaseMs);
}

/**
 * Claims the oldest deployment matching `placed` that is queued, or working under a lease that
 * ran out (its runner died: taken over), for `runnerId`: the one claim both the in-process runner
 * (claimNext) and a build server over the runner protocol (functions/servers/runner-jobs.ts) use.
 * SKIP LOCKED: two runners claiming at once never get the same row.
 */
export async function claimWhere(db: Db, runnerId: string, placed: SQL, now: Date, leaseMs = LEASE_MS): Promise<DeploymentRow | undefined> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .select()
      .from(deployments)
      .where(and(placed, or(eq(deployments.status, "queued"), and(inArray(deployments.status, WORKING), lt(deployments.leaseExpiresAt, now)))))
      .orderBy(asc(deployments.createdAt), asc(deployments.id))
      .limit(1)
      .for("update", { skipLocked: true });
    if (!row) return undefined;
    let d = row;
    let at = now;
    // A job whose runner died: its history shows the restart (queued again, then building a millisecond
    // later: transitions are read in time order, and two at the same instant would have no order).
    if (d.status !== "queued") {
      d = await transition(tx, d, "queued", now);
      at = new Date(now.getTime() + 1);
    }
    d = await transition(tx, d, "building", at);
    const [claimed] = await tx
      .update(deployments)
      .set({ claimedBy: runnerId, leaseExpiresAt: new Date(now.getTime() + leaseMs), servedBy: null, port: null, crashedAt: null })
      .where(eq(deployments.id, d.id))
      .returning();
    return claimed;
  });
}

/** Renews the lease; false when the job is no longer ours to work on (canceled, finished, taken over). */
export async function renewLease(db: Db, id: string, runnerId: string, now: Date, leaseMs = LEASE_MS): Promise<boolean> {
  const rows = await db
    .update(deployments)
    .set({ leaseExpiresAt: new Date(now.getTime() + leaseMs) })
    .where(and(eq(deployments.id, id), eq(deployments.claimedBy, runnerId), inArray(deployments.status, WORKING)))
    .returning({ id: deployments.id });
  return rows.length === 1;
}

/**
 * Moves our job from one of `from` to `to` (recorded), or returns undefined when
 * the row is no longer ours or in another state (canceled meanwhile): the caller stops.
 */
export async function advance(
  db: Db,
  id: string,
  runnerId: string,
  from: DeploymentStatus[],
  to: Exclude<DeploymentStatus, "ready" | "queued">,
  now: Date,
  failureReason?: string,
): Promise<DeploymentRow | undefined> {
  return db.transaction(async (tx) => {
    const [d] = await tx.select().from(deployments).where(eq(deployments.id, id)).for("update");
    if (!d || d.claimedBy !== runnerId || !from.includes(d.status)) return undefined;
    return transition(tx, d, to, now, failureReason);
  });
}

/** Server stop: our unfinished job goes back to the queue (recorded), unclaimed. */
export async function releaseJob(db: Db, id: string, runnerId: string, now: Date): Promise<void> {
  await db.transaction(async (tx) => {
    const [d] = await tx.select().from(deployments).where(eq(deployments.id, id)).for("update");
    if (!d || d.claimedBy !== runnerId || !WORKING.includes(d.status)) return;
    await transition(tx, d, "queued", now);
    await tx.update(deployments).set({ claimedBy: null, leaseExpiresAt: null }).where(eq(deployments.id, id));
  });
}

/** Records where the app listens (before it is made current, so a reader of the current deployment always finds its port). */
export async function setServing(db: Db, id: string, runnerId: string, port: number, now: Date): Promise<void> {
  await db.update(deployments).set({ servedBy: runnerId, port, crashedAt: null, updatedAt: now }).where(eq(deployments.id, id));
}

/**
 * At the runner's start: no app of a previous run of it listens any more (the
 * sandboxes died with that process; what its cgroups held was ended), so the
 * ports recorded then are forgotten before anything is restored. Until an app
 * is up again, edges hold its requests instead of sending them to a port that
 * may now be another process's.
 */
export async function forgetPorts(db: Db, runnerId: string): Promise<void> {
  await db
    .update(deployments)
    .set({ port: null })
    .where(and(eq(deployments.servedBy, runnerId), isNotNull(deployments.port)));
}

/** The app crashed and is being restarted: no port until it answers again (setServing), so edges hold its requests. */
export async function recordDown(db: Db, id: string, runnerId: string): Promise<void> {
  await db
    .update(deployments)
    .set({ port: null })
    .where(and(eq(deployments.id, id), eq(deployments.servedBy, runnerId)));
}

/**
 * Where an environment rolls back to after its current app was given up: the
 * newest ready deployment older than `crashed`, built and kept here (served by
 * this runner, not pruned), that never crashed; undefined when there is none.
 */
export async function rollbackTarget(db: Db, crashed: Pick<DeploymentRow, "id" | "environmentId">, runnerId: string): Promise<DeploymentRow | undefined> {
  const [row] = await db
    .select()
    .from(deployments)
    .where(
      and(
        eq(deployments.environmentId, crashed.environmentId),
        eq(deployments.status, "ready"),
        eq(deployments.current, false),
        eq(deployments.servedBy, runnerId),
        isNull(deployments.crashedAt),
        isNull(deployments.prunedAt),
        lt(deployments.id, crashed.id),
      ),
    )
    .orderBy(desc(deployments.id))
    .limit(1);
  return row;
}

/** The environment of a deployment: its name and whether it rolls back on its own. */
export async function environmentOf(db: Db, id: string): Promise<Pick<typeof environments.$inferSelect, "name" | "kind" | "autoRollback"> | undefined> {
  const [row] = await db
    .select({ name: environments.name, kind: environments.kind, autoRollback: environments.autoRollback })
    .from(environments)
    .where(eq(environments.id, id));
  return row;
}

/** The app was given up after too many crashes: it stays the record but no longer serves. */
export async function setCrashed(db: Db, id: string, now: Date): Promise<DeploymentRow | undefined> {
  const [row] = await db.update(deployments).set({ crashedAt: now, port: null, updatedAt: now }).where(eq(deployments.id, id)).returning();
  return row;
}

/** The app stopped here (no longer current, or pruned). */
export async function clearServing(db: Db, id: string, runnerId: string): Promise<void> {
  await db
    .update(deployments)
    .set({ port: null })
    .where(and(eq(deployments.id, id), eq(deployments.servedBy, runnerId), eq(deployments.current, false)));
}

/** The current deployment of an environment (the one a new one replaces). */
export async function currentOf(db: Db, environmentId: string): Promise<DeploymentRow | undefined> {
  const [row] = await db
    .select()
    .from(deployments)
    .where(and(eq(deployments.environmentId, environmentId), eq(deployments.current, true)));
  return row;
}

/** Current, ready, not crashed, awake deployments this runner serves: what must run here (boot restore, promote, wake). */
export async function deploymentsToServe(db: Db, runnerId: string): Promise<DeploymentRow[]> {
  return db
    .select()
    .from(deployments)
    .where(
      and(
        eq(deployments.current, true),
        eq(deployments.status, "ready"),
        eq(deployments.servedBy, runnerId),
        isNull(deployments.crashedAt),
        isNull(deployments.asleepAt),
      ),
    )
    .orderBy(asc(deployments.id));
}

/** Sleeping deployments of `always_on` projects served here wake (the mode changed): returns how many. */
export async function wakeAlwaysOn(db: Db, runnerId: string): Promise<number> {
  const woken = await db
    .update(deployments)
    .set({ asleepAt: null })
    .where(
      and(
        eq(deployments.servedBy, runnerId),
        isNotNull(deployments.asleepAt),
        inArray(deployments.projectId, db.select({ id: projects.id }).from(projects).where(eq(projects.sleepMode, "always_on"))),
      ),
    )
    .returning({ id: deployments.id });
  return woken.length;
}

/**
 * Which of `ids` (apps running here) are current deployments of `auto_sleep`
 * projects idle since `cutoff`: no request (last_request_at) and no start
 * (updated_at, set when it was launched) after it.
 */
export async function idleDeployments(db: Db, ids: string[], cutoff: Date): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: deployments.id })
    .from(deployments)
    .innerJoin(projects, eq(projects.id, deployments.projectId))
    .where(
      and(
        inArray(deployments.id, ids),
        eq(deployments.current, true),
        isNull(deployments.asleepAt),
        eq(projects.sleepMode, "auto_sleep"),
        lt(deployments.updatedAt, cutoff),
        or(isNull(deployments.lastRequestAt), lt(deployments.lastRequestAt, cutoff)),
      ),
    );
  return rows.map((r) => r.id);
}

/**
 * Puts an idle deployment to sleep, if it still is idle (a request since the
 * check keeps it awake): the edges then hold its requests and wake it. The row when it fell asleep.
 */
export async function setAsleep(db: Db, id: string, runnerId: string, cutoff: Date, now: Date): Promise<DeploymentRow | undefined> {
  const rows = await db
    .update(deployments)
    .set({ asleepAt: now, port: null })
    .where(
      and(
        eq(deployments.id, id),
        eq(deployments.servedBy, runnerId),
        isNull(deployments.asleepAt),
        or(isNull(deployments.lastRequestAt), lt(deployments.lastRequestAt, cutoff)),
      ),
    )
    .returning();
  return rows[0];
}

/** Which of `ids` are still current and not crashed (the apps running here that should keep running). */
export async function stillServing(db: Db, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .select({ id: deployments.id })
    .from(deployments)
    .where(and(inArray(deployments.id, ids), eq(deployments.current, true), isNull(deployments.crashedAt)));
  return new Set(rows.map((r) => r.id));
}

/**
 * Ready, not current deployments of an environment built by this runner, beyond
 * the newest `keep`: their work directories may be removed (promoting one of them
 * then needs a redeploy).
 */
export async function supersededBeyond(db: Db, environmentId: string, runnerId: string, keep: number): Promise<string[]> {
  const rows = await db
    .select({ id: deployments.id })
    .from(deployments)
    .where(
      and(eq(deployments.environmentId, environmentId), eq(deployments.status, "ready"), ne(deployments.current, true), eq(deployments.servedBy, runnerId)),
    )
    .orderBy(desc(deployments.createdAt), desc(deployments.id))
    .offset(keep)
    .limit(100);
  return rows.map((r) => r.id);
}

/** Deployment ids among `ids` that exist and are not finished-and-failed/canceled (work directories to keep). */
export async function deploymentStatuses(db: Db, ids: string[]): Promise<Map<string, DeploymentStatus>> {
  if (ids.length === 0) return new Map();
  const rows = await db.select({ id: deployments.id, status: deployments.status }).from(deployments).where(inArray(deployments.id, ids));
  return new Map(rows.map((r) => [r.id, r.status]));
}

/** A deployment with its project as pinned and its environment (the rows; db-control.ts maps them for the runner). */
export interface JobRows {
  d: DeploymentRow;
  /** The project, its resources and options as the deployment pinned them when queued (the live ones for a deployment queued before snapshots). */
  project: ProjectRow;
  environment: { id: string; name: string; kind: string };
}

/** The deployment with its project as pinned when it was queued (config-snapshot.ts) and its environment. */
export async function jobRows(db: Db, id: string): Promise<JobRows | undefined> {
  const [row] = await db
    .select({ d: deployments, project: projects, environment: { id: environments.id, name: environments.name, kind: environments.kind } })
    .from(deployments)
    .innerJoin(projects, eq(projects.id, deployments.projectId))
    .innerJoin(environments, eq(environments.id, deployments.environmentId))
    .where(eq(deployments.id, id));
  if (!row) return undefined;
  const project = row.d.configSnapshot ? withPinnedConfig(row.project, row.d.configSnapshot) : row.project;
  return { ...row, project };
}

/**
 * The deployment's variables (secrets decrypted in memory), as pinned when it
 * was queued (config-snapshot.ts): a build, a restart and a promote all run the
 * same configuration. A deployment queued before snapshots existed runs the
 * environment's live configuration. `secrets`: the secret values among them.
 */
export async function jobVariables(db: Db, keyring: Keyring, d: DeploymentRow): Promise<{ env: Record<string, string>; secrets: string[] }> {
  const scope = { orgId: d.orgId, projectId: d.projectId, environmentId: d.environmentId };
  const vars = (await pinnedVariables(keyring, d)) ?? (await decryptedEnv(db, keyring, scope));
  const env: Record<string, string> = {};
  const secrets: string[] = [];
  for (const v of vars) {
    env[v.key] = v.value;
    if (v.isSecret) secrets.push(v.value);
  }
  return { env, secrets };
}

/** Compose services' environment values of a deployment (AES-256-GCM bound to org, deployments, services, id). */
export async function decryptServiceValues(keyring: Keyring, d: DeploymentRow): Promise<Record<string, Record<string, string>>> {
  if (!d.servicesCiphertext) return {};
  const text = await keyring.decrypt(d.servicesCiphertext, { orgId: d.orgId, table: "deployments", column: "services", rowId: d.id });
  return JSON.parse(text) as Record<string, Record<string, string>>;
}

/** The deployment's kept build is being removed: it can no longer be promoted. */
export async function markPruned(db: Db, id: string, now: Date): Promise<void> {
  await db
    .update(deployments)
    .set({ prunedAt: now })
    .where(and(eq(deployments.id, id), isNull(deployments.prunedAt)));
}
