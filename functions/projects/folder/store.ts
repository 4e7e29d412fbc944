/**
 * Upload-session rows. A session belongs to the organization that opened it:
 * another organization's, an expired or an unknown session all answer the same
 * 404 ("Upload session not found").
 */
import { and, asc, count, eq, gt, lte, min, sql } from "drizzle-orm";
import { organizations, uploadSessions } from "../../../shared/db/schema";
import type { Db, Executor } from "../../../shared/db/types";
import { notFound } from "../../../shared/http/errors";

export type SessionRow = typeof uploadSessions.$inferSelect;

export const sessionNotFound = () => notFound("Upload session");

/** The caller's live session, or the one 404. `update` serializes writers of the same session inside a transaction. */
export async function findSession(ex: Executor, orgId: string, id: string, now: Date, lock?: "update"): Promise<SessionRow> {
  const query = ex
    .select()
    .from(uploadSessions)
    .where(and(eq(uploadSessions.id, id), eq(uploadSessions.orgId, orgId), gt(uploadSessions.expiresAt, now)));
  const [row] = lock ? await query.for(lock) : await query;
  if (!row) throw sessionNotFound();
  return row;
}

export interface SessionCaps {
  maxOpen: number;
  maxBytes: number;
}

/** Why a new session would exceed the organization's caps, and when the soonest-expiring open session frees its share. */
export interface CapExceeded {
  exceeded: "sessions" | "bytes";
  retryAfterSeconds: number;
}

/**
 * Inserts a session unless the organization's unexpired sessions already hit a
 * cap (count, or bytes: the uploaded size, else the hinted size, else 0). The
 * organization row is locked first, so concurrent openings of one organization
 * check and insert one at a time (other organizations are not held up).
 */
export async function insertSessionWithinCaps(
  db: Db,
  row: typeof uploadSessions.$inferInsert & { hintSizeBytes: number | null },
  now: Date,
  caps: SessionCaps,
): Promise<SessionRow | CapExceeded> {
  return db.transaction(async (tx) => {
    await tx.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, row.orgId)).for("update");
    const [usage] = await tx
      .select({
        open: count(),
        bytes: sql<string>`coalesce(sum(coalesce(${uploadSessions.sizeBytes}, ${uploadSessions.hintSizeBytes}, 0)), 0)`,
        soonest: min(uploadSessions.expiresAt),
      })
      .from(uploadSessions)
      .where(and(eq(uploadSessions.orgId, row.orgId), gt(uploadSessions.expiresAt, now)));
    const open = Number(usage?.open ?? 0);
    const bytes = Number(usage?.bytes ?? 0);
    const exceeded = open + 1 > caps.maxOpen ? "sessions" : bytes + (row.hintSizeBytes ?? 0) > caps.maxBytes ? "bytes" : null;
    if (exceeded) {
      const soonest = usage?.soonest ? new Date(usage.soonest).getTime() : now.getTime();
      return { exceeded, retryAfterSeconds: Math.max(1, Math.ceil((soonest - now.getTime()) / 1000)) };
    }
    const [inserted] = await tx.insert(uploadSessions).values(row).returning();
    return inserted!;
  });
}

/** Records a relayed upload; false when the session expired or vanished meanwhile. */
export async function markUploaded(ex: Executor, s: { orgId: string; id: string }, size: number, now: Date): Promise<boolean> {
  const rows = await ex
    .update(uploadSessions)
    .set({ uploadedAt: now, sizeBytes: size, scan: null, servicesCiphertext: null, scannedAt: null })
    .where(and(eq(uploadSessions.id, s.id), eq(uploadSessions.orgId, s.orgId), gt(uploadSessions.expiresAt, now)))
    .returning({ id: uploadSessions.id });
  return rows.length === 1;
}

export async function saveScan(
  ex: Executor,
  s: { orgId: string; id: string },
  scan: { result: Record<string, unknown>; servicesCiphertext: string | null; size: number; now: Date },
): Promise<void> {
  await ex
    .update(uploadSessions)
    .set({ scan: scan.result, servicesCiphertext: scan.servicesCiphertext, sizeBytes: scan.size, scannedAt: scan.now })
    .where(and(eq(uploadSessions.id, s.id), eq(uploadSessions.orgId, s.orgId)));
}

/** Sessions past their expiry, oldest first. */
export async function expiredSessions(ex: Executor, now: Date, limit: number) {
  return ex
    .select({ id: uploadSessions.id, orgId: uploadSessions.orgId, objectKey: uploadSessions.objectKey })
    .from(uploadSessions)
    .where(lte(uploadSessions.expiresAt, now))
    .orderBy(asc(uploadSessions.expiresAt))
    .limit(limit);
}

/** Deletes one expired session (not one an ensure has just extended). */
export async function deleteExpiredSession(ex: Executor, id: string, now: Date): Promise<void> {
  await ex.delete(uploadSessions).where(and(eq(uploadSessions.id, id), lte(uploadSessions.expiresAt, now)));
}
