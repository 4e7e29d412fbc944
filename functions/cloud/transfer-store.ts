/**
 * Transfer bookkeeping: one row per (organization, direction, source project)
 * holding its step and target, claimed with a lease so two transfers of one
 * project never run at once while a run whose process died can be resumed; and
 * the two switches that move a project's home (both one transaction).
 *
 * Fencing: each claim gives the row a new `run_id`, and every write a run makes
 * to the row (step, target, lease, end) and both switches are conditioned on it.
 * A run that stalled past its lease and was taken over finds its write refused
 * (LostLease) and stops, so it never moves the project or overwrites the
 * bookkeeping of the run that now holds the transfer.
 */
import { and, eq, gte, inArray, isNull, lt, ne, or, sql } from "drizzle-orm";
import { cloudProjects, projects, projectTransfers, type TRANSFER_DIRECTIONS } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";

export type TransferRow = typeof projectTransfers.$inferSelect;
/** This run's hold on a transfer: the row and the run id its claim set. */
export type Lease = Pick<TransferRow, "id"> & { runId: string };
export type Direction = (typeof TRANSFER_DIRECTIONS)[number];

/** A running transfer not heard from for this long is taken to have died, and may be resumed. */
export const TRANSFER_LEASE_MS = 2 * 60_000;
/** How often a live run renews its lease (well inside it). */
export const TRANSFER_HEARTBEAT_MS = 20_000;

/** A bookkeeping write refused: another run took the transfer over (this run's lease had run out). */
export class LostLease extends Error {
  constructor() {
    super("This transfer was taken over by another run (its lease ran out while this run was stalled)");
  }
}

/** Rows a fenced write matched: none means this run no longer holds the transfer. */
function held(rows: unknown[]): void {
  if (rows.length === 0) throw new LostLease();
}

const holds = (lease: Lease) => and(eq(projectTransfers.id, lease.id), eq(projectTransfers.runId, lease.runId), eq(projectTransfers.state, "running"));

/** A switch's first write: the transfer ends done, in the switch's own transaction, only while this run holds it. */
async function finishHeld(tx: Executor, lease: Lease, now: Date): Promise<void> {
  held(await tx.update(projectTransfers).set({ state: "done", error: null, updatedAt: now }).where(holds(lease)).returning({ id: projectTransfers.id }));
}

/**
 * Takes the transfer of `sourceId` for this run: a new row, a finished or failed
 * one started again (keeping its target and last step), or a running one whose
 * lease ran out; with a new run id (the run's fence). Undefined while another
 * run holds it.
 */
export async function claimTransfer(db: Db, orgId: string, direction: Direction, sourceId: string, now: Date): Promise<(TransferRow & Lease) | undefined> {
  const stale = new Date(now.getTime() - TRANSFER_LEASE_MS);
  const runId = newId("run");
  const rows = await db
    .insert(projectTransfers)
    .values({ id: newId("trf"), orgId, direction, sourceId, step: "read", state: "running", runId, startedAt: now, updatedAt: now })
    .onConflictDoUpdate({
      target: [projectTransfers.orgId, projectTransfers.direction, projectTransfers.sourceId],
      set: {
        state: "running",
        error: null,
        runId,
        updatedAt: now,
        // A finished transfer run again starts a new one; an interrupted one keeps its start.
        startedAt: sql`CASE WHEN ${projectTransfers.state} = 'done' THEN ${now.toISOString()}::timestamptz ELSE ${projectTransfers.startedAt} END`,
      },
      setWhere: or(sql`${projectTransfers.state} <> 'running'`, lt(projectTransfers.updatedAt, stale)),
    })
    .returning();
  const row = rows[0];
  return row ? { ...row, runId } : undefined;
}

/** Records the step this run enters (and renews its lease); LostLease when it no longer holds the transfer. */
export async function recordStep(db: Executor, lease: Lease, step: string, now: Date): Promise<void> {
  held(await db.update(projectTransfers).set({ step, updatedAt: now }).where(holds(lease)).returning({ id: projectTransfers.id }));
}

/** Whether a live transfer in the other direction has any of `ids` as its source or target (the same project, by either side's id). */
export async function otherDirectionRunning(db: Executor, orgId: string, direction: Direction, ids: string[], now: Date): Promise<boolean> {
  const stale = new Date(now.getTime() - TRANSFER_LEASE_MS);
  const [row] = await db
    .select({ id: projectTransfers.id })
    .from(projectTransfers)
    .where(
      and(
        eq(projectTransfers.orgId, orgId),
        ne(projectTransfers.direction, direction),
        eq(projectTransfers.state, "running"),
        gte(projectTransfers.updatedAt, stale),
        or(inArray(projectTransfers.sourceId, ids), inArray(projectTransfers.targetId, ids)),
      ),
    )
    .limit(1);
  return row !== undefined;
}

/** Renews this run's lease; false when it no longer holds the transfer (a taken-over run never renews the new holder's). */
export async function touchTransfer(db: Executor, lease: Lease, now: Date): Promise<boolean> {
  const rows = await db.update(projectTransfers).set({ updatedAt: now }).where(holds(lease)).returning({ id: projectTransfers.id });
  return rows.length > 0;
}

export async function recordTarget(db: Executor, lease: Lease, targetId: string | null, now: Date): Promise<void> {
  held(await db.update(projectTransfers).set({ targetId, updatedAt: now }).where(holds(lease)).returning({ id: projectTransfers.id }));
}

export async function endTransfer(db: Executor, lease: Lease, outcome: { state: "done" } | { state: "failed"; error: string }, now: Date): Promise<void> {
  held(
    await db
      .update(projectTransfers)
      .set({ state: outcome.state, error: outcome.state === "failed" ? outcome.error : null, updatedAt: now })
      .where(holds(lease))
      .returning({ id: projectTransfers.id }),
  );
}

/** The transfer's state now (undefined: the row is gone): whether a run that lost it must undo what it did on the sides. */
export async function transferState(db: Executor, id: string): Promise<TransferRow["state"] | undefined> {
  const [row] = await db.select({ state: projectTransfers.state }).from(projectTransfers).where(eq(projectTransfers.id, id));
  return row?.state;
}

/** The cloud project a local project was transferred to before (a round trip reuses it rather than making a second). */
export async function earlierCloudCopy(db: Executor, orgId: string, localProjectId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ id: cloudProjects.id })
    .from(cloudProjects)
    .where(and(eq(cloudProjects.orgId, orgId), eq(cloudProjects.localProjectId, localProjectId)));
  return row?.id;
}

/** The local project a cloud project came from or was brought back into, if it still exists here. */
export async function localCopyOf(db: Executor, orgId: string, cloudId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ id: projects.id })
    .from(cloudProjects)
    .innerJoin(projects, eq(projects.id, cloudProjects.localProjectId))
    .where(and(eq(cloudProjects.orgId, orgId), eq(cloudProjects.id, cloudId), eq(projects.orgId, orgId)));
  return row?.id;
}

/** `projectId` when it is still one of the organization's projects here (shown or a stub). */
export async function existingLocal(db: Executor, orgId: string, projectId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ id: projects.id })
    .from(projects)
    .where(and(eq(projects.id, projectId), eq(projects.orgId, orgId)));
  return row?.id;
}

/**
 * to-cloud's last step: the local project becomes a stub of `cloudId` (hidden here,
 * its per-project routes forwarded, disabled so the edge and runner let it go),
 * its deployments and logs kept; the transfer ends done. All or nothing, and only
 * while `lease` holds the transfer (LostLease, nothing changed, otherwise).
 */
export async function moveToCloud(db: Db, lease: Lease, orgId: string, projectId: string, cloudId: string, name: string, now: Date): Promise<void> {
  await db.transaction(async (tx) => {
    await finishHeld(tx, lease, now);
    await tx
      .update(projects)
      // Disabled as POST /disable leaves a project (routing offline): the edge and the runner go by these columns, not by movedToCloud.
      .set({
        movedToCloud: cloudId,
        disabledAt: sql`COALESCE(${projects.disabledAt}, ${now.toISOString()}::timestamptz)`,
        routingState: "offline",
        routingLastAttemptAt: now,
        updatedAt: now,
      })
      .where(and(eq(projects.id, projectId), eq(projects.orgId, orgId)));
    await tx
      .insert(cloudProjects)
      .values({ id: cloudId, orgId, name, localProjectId: projectId, seenAt: now })
      .onConflictDoUpdate({
        target: [cloudProjects.orgId, cloudProjects.id],
        set: { localProjectId: projectId, returnedAt: null, name, seenAt: now },
      });
  });
}

/** Shows a stub again here while to-self-hosted copies into it (its routes stop being forwarded). */
export async function unhide(db: Executor, orgId: string, projectId: string, cloudId: string): Promise<void> {
  await db
    .update(projects)
    .set({ movedToCloud: null })
    .where(and(eq(projects.id, projectId), eq(projects.orgId, orgId), eq(projects.movedToCloud, cloudId)));
}

/** A failed to-self-hosted puts its partial copy back behind the stub: the project stays the cloud's. */
export async function hideAgain(db: Executor, orgId: string, projectId: string, cloudId: string): Promise<void> {
  await db
    .update(projects)
    .set({ movedToCloud: cloudId })
    .where(and(eq(projects.id, projectId), eq(projects.orgId, orgId), isNull(projects.movedToCloud)));
}

/**
 * to-self-hosted's last step: the cloud project is marked brought back (no longer
 * forwarded or listed), pointing at its local copy; the transfer ends done. All or
 * nothing, and only while `lease` holds the transfer.
 */
export async function markReturned(db: Db, lease: Lease, orgId: string, cloudId: string, localProjectId: string, name: string, now: Date): Promise<void> {
  await db.transaction(async (tx) => {
    await finishHeld(tx, lease, now);
    await tx
      .insert(cloudProjects)
      .values({ id: cloudId, orgId, name, localProjectId, returnedAt: now, seenAt: now })
      .onConflictDoUpdate({ target: [cloudProjects.orgId, cloudProjects.id], set: { localProjectId, returnedAt: now, name, seenAt: now } });
  });
}
