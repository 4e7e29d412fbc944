/**
 * The in-app alert feed (deliveries) of the caller in the active organization:
 * newest first, with the state of each external send of the notification.
 */
import { and, asc, count, desc, eq, inArray, isNotNull, isNull, lt, sql } from "drizzle-orm";
import { notificationAttempts, notificationDeliveries, notificationEvents, notificationOutbox } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import type { Owner } from "./store";

const iso = (d: Date | null) => d?.toISOString() ?? null;

const columns = {
  id: notificationDeliveries.id,
  eventId: notificationDeliveries.eventId,
  seenAt: notificationDeliveries.seenAt,
  createdAt: notificationDeliveries.createdAt,
  category: notificationEvents.category,
  title: notificationEvents.title,
  message: notificationEvents.message,
  projectId: notificationEvents.projectId,
  data: notificationEvents.data,
};

type Row = {
  id: string;
  eventId: string;
  seenAt: Date | null;
  createdAt: Date;
  category: string;
  title: string;
  message: string | null;
  projectId: string | null;
  data: Record<string, unknown> | null;
};
type SendRow = typeof notificationOutbox.$inferSelect;

const owns = (o: Owner) => and(eq(notificationDeliveries.orgId, o.orgId), eq(notificationDeliveries.userId, o.userId));

function sendView(s: SendRow) {
  return {
    id: s.id,
    channelId: s.channelId,
    kind: s.kind,
    // A leased send is still waiting for its outcome.
    status: s.status,
    attempts: s.attempts,
    lastError: s.lastError,
    lastStatusCode: s.lastStatusCode,
    nextAttemptAt: s.status === "pending" ? s.dueAt.toISOString() : null,
    completedAt: iso(s.completedAt),
  };
}

function view(r: Row, sends: SendRow[]) {
  return {
    id: r.id,
    eventId: r.eventId,
    category: r.category,
    title: r.title,
    message: r.message,
    projectId: r.projectId,
    data: r.data,
    seen: r.seenAt !== null,
    seenAt: iso(r.seenAt),
    createdAt: r.createdAt.toISOString(),
    sends: sends.map(sendView),
  };
}

async function sendsOf(db: Db, deliveryIds: string[]): Promise<Map<string, SendRow[]>> {
  const map = new Map<string, SendRow[]>();
  if (deliveryIds.length === 0) return map;
  const rows = await db.select().from(notificationOutbox).where(inArray(notificationOutbox.deliveryId, deliveryIds)).orderBy(asc(notificationOutbox.id));
  for (const s of rows) map.set(s.deliveryId, [...(map.get(s.deliveryId) ?? []), s]);
  return map;
}

/** Newest first; the cursor is the last id of the previous page. */
export async function listDeliveries(db: Db, o: Owner, opts: { limit: number; cursor?: string; unseen?: boolean }) {
  const rows = await db
    .select(columns)
    .from(notificationDeliveries)
    .innerJoin(notificationEvents, eq(notificationEvents.id, notificationDeliveries.eventId))
    .where(
      and(
        owns(o),
        opts.unseen === undefined ? undefined : opts.unseen ? isNull(notificationDeliveries.seenAt) : isNotNull(notificationDeliveries.seenAt),
        opts.cursor ? lt(notificationDeliveries.id, opts.cursor) : undefined,
      ),
    )
    .orderBy(desc(notificationDeliveries.id))
    .limit(opts.limit + 1);
  const page = rows.slice(0, opts.limit);
  const sends = await sendsOf(
    db,
    page.map((r) => r.id),
  );
  return {
    items: page.map((r) => view(r, sends.get(r.id) ?? [])),
    nextCursor: rows.length > opts.limit ? page[page.length - 1]!.id : null,
  };
}

export async function unseenCount(db: Db, o: Owner): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(notificationDeliveries)
    .where(and(owns(o), isNull(notificationDeliveries.seenAt)));
  return row!.n;
}

async function one(db: Db, o: Owner, id: string): Promise<Row> {
  const [row] = await db
    .select(columns)
    .from(notificationDeliveries)
    .innerJoin(notificationEvents, eq(notificationEvents.id, notificationDeliveries.eventId))
    .where(and(owns(o), eq(notificationDeliveries.id, id)));
  if (!row) throw notFound("Delivery");
  return row;
}

/** One entry, each send with its attempt log. */
export async function getDelivery(db: Db, o: Owner, id: string) {
  const row = await one(db, o, id);
  const sends = (await sendsOf(db, [id])).get(id) ?? [];
  const attempts = sends.length
    ? await db
        .select()
        .from(notificationAttempts)
        .where(
          inArray(
            notificationAttempts.outboxId,
            sends.map((s) => s.id),
          ),
        )
        .orderBy(asc(notificationAttempts.outboxId), asc(notificationAttempts.attempt))
    : [];
  const base = view(row, sends);
  return {
    ...base,
    sends: base.sends.map((s) => ({
      ...s,
      attemptLog: attempts
        .filter((a) => a.outboxId === s.id)
        .map((a) => ({
          attempt: a.attempt,
          startedAt: a.startedAt.toISOString(),
          durationMs: a.durationMs,
          outcome: a.outcome,
          statusCode: a.statusCode,
          error: a.error,
          nextAttemptAt: iso(a.nextAttemptAt),
        })),
    })),
  };
}

/** Idempotent: the first time it was seen is kept. */
export async function markSeen(db: Db, o: Owner, id: string, now: Date) {
  const updated = await db
    .update(notificationDeliveries)
    .set({ seenAt: sql`coalesce(${notificationDeliveries.seenAt}, ${now.toISOString()}::timestamptz)` })
    .where(and(owns(o), eq(notificationDeliveries.id, id)))
    .returning({ id: notificationDeliveries.id });
  if (updated.length === 0) throw notFound("Delivery");
  const row = await one(db, o, id);
  const sends = (await sendsOf(db, [id])).get(id) ?? [];
  return view(row, sends);
}

/** The in_app test send: a `test` event with the caller as its only recipient. */
export async function recordTestEntry(db: Db, o: Owner, event: typeof notificationEvents.$inferInsert & { id: string; createdAt: Date }): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.insert(notificationEvents).values(event);
    await tx
      .insert(notificationDeliveries)
      .values({ id: newId("ndlv", event.createdAt.getTime()), orgId: o.orgId, userId: o.userId, eventId: event.id, createdAt: event.createdAt });
  });
}
