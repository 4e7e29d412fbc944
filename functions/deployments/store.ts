/**
 * Deployment rows and their transitions. Every status change goes through
 * `transition`, which writes the row and its `deployment_transitions` line in the
 * caller's transaction, so the history never misses a step.
 */
import { and, asc, desc, eq, gt, inArray, isNotNull, sql } from "drizzle-orm";
import { type DEPLOYMENT_STATUSES, deployments, deploymentTransitions, environments, projectServices, uploadSessions } from "../../shared/db/schema";
import type { Db, Executor, Tx } from "../../shared/db/types";
import { ApiError, notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";

export type DeploymentRow = typeof deployments.$inferSelect;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
export type NewDeployment = Omit<typeof deployments.$inferInsert, "id" | "status" | "current" | "createdAt" | "updatedAt">;

/** States a deployment never leaves. */
export const FINISHED: readonly DeploymentStatus[] = ["ready", "failed", "canceled"];
/** States cancel stops (a deploying one is about to switch traffic: it finishes or fails). */
export const CANCELABLE: readonly DeploymentStatus[] = ["queued", "building"];

const deploymentNotFound = () => notFound("Deployment");

export interface Transition {
  status: DeploymentStatus;
  at: Date;
}

async function record(ex: Executor, d: Pick<DeploymentRow, "id" | "orgId">, status: DeploymentStatus, at: Date) {
  await ex.insert(deploymentTransitions).values({ id: newId("dtr"), orgId: d.orgId, deploymentId: d.id, status, at });
}

/**
 * Inserts a queued deployment and its first transition; `id` when it was chosen before (an upload's artifact key names it).
 * Queueing goes through insertPinnedDeployment (config-snapshot.ts), which pins the configuration first; a row
 * inserted here alone has no snapshot, like one queued before snapshots existed.
 */
export async function insertDeployment(tx: Tx, values: NewDeployment, now: Date, id: string = newId("dpl")): Promise<DeploymentRow> {
  const [row] = await tx
    .insert(deployments)
    .values({ ...values, id, status: "queued", createdAt: now, updatedAt: now })
    .returning();
  await record(tx, row!, "queued", now);
  return row!;
}

/** The caller's deployment with its environment's name, or the one 404 (foreign, deleted and unknown alike). */
export async function findDeployment(ex: Executor, orgId: string, id: string, lock?: "update"): Promise<{ d: DeploymentRow; environment: string }> {
  const query = ex
    .select({ d: deployments, environment: environments.name })
    .from(deployments)
    .innerJoin(environments, eq(environments.id, deployments.environmentId))
    .where(and(eq(deployments.id, id), eq(deployments.orgId, orgId)));
  const [row] = lock ? await query.for(lock, { of: deployments }) : await query;
  if (!row) throw deploymentNotFound();
  return row;
}

/** Each deployment's transitions in order. */
export async function transitionsOf(ex: Executor, ids: string[]): Promise<Map<string, Transition[]>> {
  const out = new Map<string, Transition[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const rows = await ex
    .select()
    .from(deploymentTransitions)
    .where(inArray(deploymentTransitions.deploymentId, ids))
    .orderBy(asc(deploymentTransitions.at), asc(deploymentTransitions.id));
  for (const r of rows) out.get(r.deploymentId)!.push({ status: r.status, at: r.at });
  return out;
}

/**
 * Moves a deployment (locked by the caller) to `status` and records it. A finished
 * state sets `finished_at` and drops the runner's lease.
 */
export async function transition(tx: Tx, d: DeploymentRow, status: DeploymentStatus, now: Date, failureReason?: string): Promise<DeploymentRow> {
  const finished = FINISHED.includes(status);
  const [row] = await tx
    .update(deployments)
    .set({
      status,
      updatedAt: now,
      ...(finished ? { finishedAt: now, claimedBy: null, leaseExpiresAt: null } : {}),
      ...(failureReason !== undefined ? { failureReason } : {}),
    })
    .where(eq(deployments.id, d.id))
    .returning();
  await record(tx, d, status, now);
  return row!;
}

/**
 * Makes a ready deployment its environment's current one and the previous current
 * one not. The environment row is locked first: concurrent switches of the same
 * environment run one after the other, so the partial unique index never sees two.
 */
async function makeCurrent(tx: Tx, d: DeploymentRow, now: Date): Promise<DeploymentRow> {
  await tx.select({ id: environments.id }).from(environments).where(eq(environments.id, d.environmentId)).for("update");
  await tx
    .update(deployments)
    .set({ current: false, updatedAt: now })
    .where(and(eq(deployments.environmentId, d.environmentId), eq(deployments.current, true)));
  const [row] = await tx.update(deployments).set({ current: true, updatedAt: now }).where(eq(deployments.id, d.id)).returning();
  return row!;
}

/** POST :id/cancel: queued or building → canceled; anything else is 409. */
export async function cancelDeployment(db: Db, orgId: string, id: string, now: Date): Promise<DeploymentRow> {
  return (await cancelDeploymentFrom(db, orgId, id, now)).row;
}

/** cancelDeployment, telling the status it was canceled from (a queued one was never claimed: no runner holds its artifact). */
export async function cancelDeploymentFrom(db: Db, orgId: string, id: string, now: Date): Promise<{ row: DeploymentRow; from: DeploymentStatus }> {
  return db.transaction(async (tx) => {
    const { d } = await findDeployment(tx, orgId, id, "update");
    if (!CANCELABLE.includes(d.status)) {
      throw new ApiError("conflict", `The deployment is ${d.status}: only a queued or building deployment can be canceled`);
    }
    return { row: await transition(tx, d, "canceled", now), from: d.status };
  });
}

/** POST :id/promote: a ready, non-current deployment becomes its environment's current one (rollback without a rebuild). */
export async function promoteDeployment(db: Db, orgId: string, id: string, now: Date): Promise<DeploymentRow> {
  return db.transaction(async (tx) => {
    // The environment lock comes first (as in makeCurrent): two promotes of one environment queue there, then re-read.
    const { d: seen } = await findDeployment(tx, orgId, id);
    await tx.select({ id: environments.id }).from(environments).where(eq(environments.id, seen.environmentId)).for("update");
    const { d } = await findDeployment(tx, orgId, id, "update");
    if (d.status !== "ready") throw new ApiError("conflict", `The deployment is ${d.status}: only a ready deployment can be promoted`);
    if (d.current) throw new ApiError("conflict", "The deployment is already its environment's current deployment");
    if (d.prunedAt) throw new ApiError("conflict", "The deployment's build was removed (only the newest superseded builds are kept): deploy again instead");
    if (d.crashedAt) throw new ApiError("conflict", "The deployment crashed more often than the restart policy allows: deploy again instead");
    return makeCurrent(tx, d, now);
  });
}

/**
 * The runner's last step (and the tests' stand-in for it): the deployment is ready
 * and serves, the previous current one of its environment stops serving.
 */
export async function markReady(db: Db, id: string, now: Date): Promise<DeploymentRow> {
  return db.transaction(async (tx) => {
    const [d] = await tx.select().from(deployments).where(eq(deployments.id, id)).for("update");
    if (!d) throw deploymentNotFound();
    const ready = await transition(tx, d, "ready", now);
    return makeCurrent(tx, ready, now);
  });
}

/**
 * markReady for a runner that must still hold the job (the runner protocol): under the row's lock,
 * only while `runnerId` holds it in `deploying`; undefined otherwise (canceled or taken over
 * meanwhile), and nothing is written.
 */
export async function markReadyIfHeld(db: Db, id: string, runnerId: string, now: Date): Promise<DeploymentRow | undefined> {
  return db.transaction(async (tx) => {
    const [d] = await tx.select().from(deployments).where(eq(deployments.id, id)).for("update");
    if (!d || d.claimedBy !== runnerId || d.status !== "deploying") return undefined;
    return makeCurrent(tx, await transition(tx, d, "ready", now), now);
  });
}

/** A status change the runner reports (building, deploying, failed), recorded with its time. */
export async function markStatus(
  db: Db,
  id: string,
  status: Exclude<DeploymentStatus, "ready" | "queued">,
  now: Date,
  failureReason?: string,
): Promise<DeploymentRow> {
  return db.transaction(async (tx) => {
    const [d] = await tx.select().from(deployments).where(eq(deployments.id, id)).for("update");
    if (!d) throw deploymentNotFound();
    return transition(tx, d, status, now, failureReason);
  });
}

export type UploadSessionRow = typeof uploadSessions.$inferSelect;
/** An upload deployment's source, as a later redeploy copies it. */
export type PreviousUpload = Pick<DeploymentRow, "id" | "orgId" | "artifactKey" | "artifactBytes" | "uploadSessionId" | "services" | "servicesCiphertext">;

/**
 * The upload an upload project redeploys: the newest scanned, unexpired upload
 * session an ensure bound to the project, else the folder its newest upload
 * deployment came from (its upload session), copied from the newest deployment of
 * that folder whose artifact is still stored; when none is (they all failed or were
 * canceled, and their artifacts were removed), that newest deployment with no
 * artifact key (queueUpload: 409, upload it again), never an older folder.
 * Undefined when neither a session nor an upload deployment exists.
 */
export async function lastUpload(
  ex: Executor,
  projectId: string,
  now: Date,
): Promise<{ session: UploadSessionRow; previous?: undefined } | { session?: undefined; previous: PreviousUpload } | undefined> {
  const [session] = await ex
    .select()
    .from(uploadSessions)
    .where(and(eq(uploadSessions.projectId, projectId), isNotNull(uploadSessions.scannedAt), gt(uploadSessions.expiresAt, now)))
    .orderBy(desc(uploadSessions.createdAt), desc(uploadSessions.id))
    .limit(1);
  if (session) return { session };
  const columns = {
    id: deployments.id,
    orgId: deployments.orgId,
    artifactKey: deployments.artifactKey,
    artifactBytes: deployments.artifactBytes,
    uploadSessionId: deployments.uploadSessionId,
    services: deployments.services,
    servicesCiphertext: deployments.servicesCiphertext,
  };
  const uploads = and(eq(deployments.projectId, projectId), eq(deployments.source, "upload"));
  const [newest] = await ex.select(columns).from(deployments).where(uploads).orderBy(desc(deployments.id)).limit(1);
  if (!newest) return undefined;
  if (newest.artifactKey) return { previous: newest };
  const [stored] = await ex
    .select(columns)
    .from(deployments)
    .where(and(uploads, isNotNull(deployments.artifactKey), sql`${deployments.uploadSessionId} is not distinct from ${newest.uploadSessionId}`))
    .orderBy(desc(deployments.id))
    .limit(1);
  return { previous: stored ?? newest };
}

/** The project's compose services as the last ensure stored them, in their order (values still encrypted). */
export async function projectServiceRows(ex: Executor, projectId: string) {
  return ex.select().from(projectServices).where(eq(projectServices.projectId, projectId)).orderBy(asc(projectServices.position));
}
