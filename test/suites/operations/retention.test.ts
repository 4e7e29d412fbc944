/**
 * The retention sweep (functions/operations/retention/): for each kind, rows past
 * their bound go and newer ones stay; log lines are capped per kind, so request
 * lines never push build lines out, and a project's log stops growing under a
 * steady load; the settings are read from the environment, naming a bad one.
 * The sweep is scoped to each test's organization where the table has one.
 */
import { and, eq, inArray } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { recordSystemAudit } from "../../../functions/operations/audit/record";
import { DEFAULT_RETENTION, type RetentionSettings, retentionFromEnv } from "../../../functions/operations/retention/settings";
import { sweepRetention } from "../../../functions/operations/retention/sweep";
import { requestSeeder } from "../logs/support";
import { appendLogLines, type NewLogLine } from "../../../functions/logs/store";
import { SESSION_IDLE_MS } from "../../../shared/auth/session";
import {
  auditLog,
  idempotencyKeys,
  logLines,
  notificationAttempts,
  notificationDeliveries,
  notificationEvents,
  notificationOutbox,
  rateLimits,
  requestLogBatches,
  sessions,
  signInCodes,
} from "../../../shared/db/schema";
import { IDEMPOTENCY_TTL_MS } from "../../../shared/http/idempotency";
import { newId } from "../../../shared/ids";
import { type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { storedRequestLines } from "../../support/request-lines";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create } = projectHelpers(h);
const DAY = 86_400_000;
const NOW = new Date();
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const sweep = (t: Member, settings: RetentionSettings = DEFAULT_RETENTION) => sweepRetention(h.db, settings, NOW, { orgIds: [t.orgId] });

/** One event with its feed entry, one send of it and one attempt of that send, each at the given time. */
async function notification(
  t: Member,
  o: { at: Date; status: "pending" | "sending" | "delivered"; sendAt?: Date; completedAt?: Date | null; attemptAt?: Date | null },
) {
  const eventId = newId("evt");
  const deliveryId = newId("dlv");
  const outboxId = newId("obx");
  await h.db.insert(notificationEvents).values({ id: eventId, orgId: t.orgId, category: "deployment.failed", title: "t", createdAt: o.at });
  await h.db.insert(notificationDeliveries).values({ id: deliveryId, orgId: t.orgId, userId: t.userId, eventId, createdAt: o.at });
  const sendAt = o.sendAt ?? o.at;
  await h.db.insert(notificationOutbox).values({
    id: outboxId,
    orgId: t.orgId,
    userId: t.userId,
    eventId,
    deliveryId,
    kind: "webhook",
    status: o.status,
    dueAt: new Date(NOW.getTime() + DAY),
    createdAt: sendAt,
    completedAt: o.completedAt ?? null,
  });
  if (o.attemptAt) {
    await h.db
      .insert(notificationAttempts)
      .values({ id: newId("att"), outboxId, attempt: 1, startedAt: o.attemptAt, durationMs: 5, outcome: o.status === "delivered" ? "delivered" : "retry" });
  }
  return { eventId, deliveryId, outboxId };
}

const exists = async (table: typeof notificationEvents | typeof notificationDeliveries | typeof notificationOutbox, id: string) =>
  (await h.db.select({ id: table.id }).from(table).where(eq(table.id, id))).length === 1;

describe("retention sweep", () => {
  it("notifications: old finished sends, attempts, feed entries and events go; newer ones and sends under way stay; a send waiting too long is given up", async () => {
    const t = await seedTenant(h);
    // Everything old and finished: the attempt, the send, the feed entry, then the event go.
    const old = await notification(t, { at: ago(100 * DAY), status: "delivered", completedAt: ago(40 * DAY), attemptAt: ago(40 * DAY) });
    // Everything recent: stays.
    const fresh = await notification(t, { at: ago(DAY), status: "delivered", completedAt: ago(DAY), attemptAt: ago(DAY) });
    // An old feed entry whose send is still under way: the entry and its event stay.
    const busy = await notification(t, { at: ago(100 * DAY), status: "sending", sendAt: ago(DAY) });
    // A send deferred for 10 days (past NOTIFICATION_SEND_MAX_AGE_DAYS, 7): given up, kept for the outbox retention.
    const stale = await notification(t, { at: ago(10 * DAY), status: "pending", attemptAt: ago(10 * DAY) });
    // An event nobody received, older than its retention: goes.
    const lonely = newId("evt");
    await h.db.insert(notificationEvents).values({ id: lonely, orgId: t.orgId, category: "deployment.failed", title: "t", createdAt: ago(100 * DAY) });

    const { removed, failed } = await sweep(t);
    expect(failed).toEqual({});
    for (const table of [notificationEvents, notificationDeliveries, notificationOutbox] as const) {
      expect(await exists(table, old[table === notificationEvents ? "eventId" : table === notificationDeliveries ? "deliveryId" : "outboxId"])).toBe(false);
    }
    expect(await exists(notificationEvents, lonely)).toBe(false);
    expect(await exists(notificationEvents, fresh.eventId)).toBe(true);
    expect(await exists(notificationDeliveries, fresh.deliveryId)).toBe(true);
    expect(await exists(notificationOutbox, fresh.outboxId)).toBe(true);
    expect((await h.db.select().from(notificationAttempts).where(eq(notificationAttempts.outboxId, fresh.outboxId))).length).toBe(1);
    expect(await exists(notificationDeliveries, busy.deliveryId)).toBe(true);
    expect(await exists(notificationEvents, busy.eventId)).toBe(true);
    const [given] = await h.db.select().from(notificationOutbox).where(eq(notificationOutbox.id, stale.outboxId));
    expect(given).toMatchObject({ status: "failed" });
    expect(given!.lastError).toMatch(/NOTIFICATION_SEND_MAX_AGE_DAYS/);
    // Its 10-day-old attempt is within the 30 days attempts are kept.
    expect((await h.db.select().from(notificationAttempts).where(eq(notificationAttempts.outboxId, stale.outboxId))).length).toBe(1);
    expect(removed).toMatchObject({ sendsGivenUp: 1, outbox: 1, feed: 1 });
    expect(removed.events).toBe(2);

    // A second pass finds nothing more of this organization's to remove.
    const again = await sweep(t);
    expect([again.removed.outbox, again.removed.feed, again.removed.events, again.removed.sendsGivenUp]).toEqual([0, 0, 0, 0]);
  });

  it("delivery attempts older than their retention go on their own", async () => {
    const t = await seedTenant(h);
    const n = await notification(t, { at: ago(DAY), status: "pending", attemptAt: ago(31 * DAY) });
    await h.db
      .insert(notificationAttempts)
      .values({ id: newId("att"), outboxId: n.outboxId, attempt: 2, startedAt: ago(DAY), durationMs: 5, outcome: "retry" });
    expect((await sweep(t)).removed.attempts).toBe(1);
    const left = await h.db.select().from(notificationAttempts).where(eq(notificationAttempts.outboxId, n.outboxId));
    expect(left.map((a) => a.attempt)).toEqual([2]);
  });

  it("audit rows older than AUDIT_RETENTION_DAYS go", async () => {
    const t = await seedTenant(h);
    await recordSystemAudit(h.db, t.orgId, { action: "project.deleted", target: { kind: "project", id: "old" } }, ago(366 * DAY));
    await recordSystemAudit(h.db, t.orgId, { action: "project.deleted", target: { kind: "project", id: "new" } }, ago(364 * DAY));
    expect((await sweep(t)).removed.audit).toBe(1);
    const rows = await h.db.select().from(auditLog).where(eq(auditLog.orgId, t.orgId));
    expect(rows.map((r) => r.targetId)).toEqual(["new"]);
    // A shorter setting takes the other one too.
    expect((await sweep(t, { ...DEFAULT_RETENTION, auditDays: 30 })).removed.audit).toBe(1);
  });

  it("sessions past their expiry or idle too long, expired sign-in codes, ended rate-limit windows and day-old idempotency keys go", async () => {
    const t = await seedTenant(h);
    const session = (id: string, lastSeenAt: Date, expiresAt: Date) => ({ id, userId: t.userId, secretHash: newId("hash"), lastSeenAt, expiresAt });
    const [expired, idle, live] = [newId("ses"), newId("ses"), newId("ses")];
    await h.db
      .insert(sessions)
      .values([
        session(expired, ago(60_000), ago(1000)),
        session(idle, ago(SESSION_IDLE_MS + 60_000), new Date(NOW.getTime() + DAY)),
        session(live, ago(60_000), new Date(NOW.getTime() + DAY)),
      ]);
    const [oldCode, newCode] = [`${newId("a")}@example.test`, `${newId("b")}@example.test`];
    const code = (email: string, expiresAt: Date) => ({ email, codeHash: "h", salt: "s", expiresAt });
    await h.db.insert(signInCodes).values([code(oldCode, ago(1000)), code(newCode, new Date(NOW.getTime() + 600_000))]);
    const [ended, open] = [`test:${newId("rl")}`, `test:${newId("rl")}`];
    await h.db.insert(rateLimits).values([
      { key: ended, windowEnd: ago(1000), count: 1, granted: 1 },
      { key: open, windowEnd: new Date(NOW.getTime() + 60_000), count: 1, granted: 1 },
    ]);
    const principal = newId("p");
    const key = (k: string, createdAt: Date) => ({ principal, route: "POST /api/projects", key: k, requestHash: "x", createdAt });
    await h.db.insert(idempotencyKeys).values([key("old", ago(IDEMPOTENCY_TTL_MS + 1000)), key("new", ago(IDEMPOTENCY_TTL_MS - 60_000))]);

    const { failed } = await sweep(t);
    expect(failed).toEqual({});
    const ids = (
      await h.db
        .select({ id: sessions.id })
        .from(sessions)
        .where(inArray(sessions.id, [expired, idle, live]))
    ).map((r) => r.id);
    expect(ids).toEqual([live]);
    const codes = (
      await h.db
        .select()
        .from(signInCodes)
        .where(inArray(signInCodes.email, [oldCode, newCode]))
    ).map((r) => r.email);
    expect(codes).toEqual([newCode]);
    const windows = (
      await h.db
        .select()
        .from(rateLimits)
        .where(inArray(rateLimits.key, [ended, open]))
    ).map((r) => r.key);
    expect(windows).toEqual([open]);
    const keys = (await h.db.select().from(idempotencyKeys).where(eq(idempotencyKeys.principal, principal))).map((r) => r.key);
    expect(keys).toEqual(["new"]);
  });

  describe("log lines", () => {
    const lines = (t: Member, projectId: string, kind: NewLogLine["kind"], n: number, at = NOW): NewLogLine[] =>
      Array.from({ length: n }, (_, i) => ({ orgId: t.orgId, projectId, deploymentId: null, kind, stream: "stdout", at, message: `${kind} ${i}` }));
    /** Request lines `/0`…`/<n-1>` (after `from`), in one batch row as the edge's writer stores a flush. */
    const requests = (t: Member, projectId: string, n: number, from = 0, at = NOW) =>
      requestSeeder(h)(
        { orgId: t.orgId, projectId },
        Array.from({ length: n }, (_, i) => ({ at: new Date(at.getTime() + i), path: `/${from + i}`, status: 200 })),
      );
    const small: RetentionSettings = { ...DEFAULT_RETENTION, logLines: { build: 3, runtime: 4, request: 5 } };
    const kept = async (projectId: string, kind: NewLogLine["kind"]) =>
      (
        await h.db
          .select({ message: logLines.message })
          .from(logLines)
          .where(and(eq(logLines.projectId, projectId), eq(logLines.kind, kind)))
      ).map((r) => r.message);
    const keptRequests = async (projectId: string) => (await storedRequestLines(h.db, projectId)).map((l) => [l.seq, l.path]);

    it("each kind keeps its own newest lines: a flood of request lines does not push build lines out", async () => {
      const t = await seedTenant(h);
      const p = await create(t);
      await appendLogLines(h.db, lines(t, p.id, "build", 6));
      await appendLogLines(h.db, lines(t, p.id, "runtime", 2));
      await requests(t, p.id, 40);
      const { removed } = await sweep(t, small);
      expect(removed.logLinesByCap).toBe(3 + 35);
      expect((await kept(p.id, "build")).sort()).toEqual(["build 3", "build 4", "build 5"]);
      expect(await kept(p.id, "runtime")).toHaveLength(2);
      // The batch of 40 keeps its newest 5 lines, with their own numbers (8 build and runtime lines came first).
      expect(await keptRequests(p.id)).toEqual([44, 45, 46, 47, 48].map((seq) => [seq, `/${seq - 9}`]));
    });

    it("request lines are capped across batches: older batches go whole, the one at the edge is cut to the newest lines", async () => {
      const t = await seedTenant(h);
      const p = await create(t);
      for (let b = 0; b < 3; b++) await requests(t, p.id, 4, b * 4);
      const { removed } = await sweep(t, small);
      expect(removed.logLinesByCap).toBe(7);
      expect(await keptRequests(p.id)).toEqual([
        [8, "/7"],
        [9, "/8"],
        [10, "/9"],
        [11, "/10"],
        [12, "/11"],
      ]);
      const [cut] = await h.db
        .select()
        .from(requestLogBatches)
        .where(and(eq(requestLogBatches.projectId, p.id), eq(requestLogBatches.firstSeq, 8)));
      expect(cut!.firstAt.getTime()).toBe(NOW.getTime() + 3);
      // A second pass finds nothing more to cut.
      expect((await sweep(t, small)).removed.logLinesByCap).toBe(0);
    });

    it("lines older than LOG_RETENTION_DAYS go, whatever their kind", async () => {
      const t = await seedTenant(h);
      const p = await create(t);
      await appendLogLines(h.db, [...lines(t, p.id, "build", 2, ago(31 * DAY)), ...lines(t, p.id, "runtime", 1, ago(29 * DAY))]);
      await requests(t, p.id, 3, 0, ago(31 * DAY));
      await requests(t, p.id, 1, 3, ago(29 * DAY));
      expect((await sweep(t)).removed.logLinesByAge).toBe(2 + 3);
      expect(await kept(p.id, "build")).toEqual([]);
      expect(await kept(p.id, "runtime")).toHaveLength(1);
      expect((await keptRequests(p.id)).map(([, path]) => path)).toEqual(["/3"]);
    });

    it("under a steady load, a project's log stops growing at its caps", async () => {
      const t = await seedTenant(h);
      const p = await create(t);
      const sizes: number[] = [];
      for (let round = 0; round < 4; round++) {
        await requests(t, p.id, 20, round * 20);
        await appendLogLines(h.db, [...lines(t, p.id, "build", 2), ...lines(t, p.id, "runtime", 3)]);
        await sweep(t, small);
        const stored = (await h.db.select({ seq: logLines.seq }).from(logLines).where(eq(logLines.projectId, p.id))).length;
        sizes.push(stored + (await keptRequests(p.id)).length);
      }
      // First round: 5 request lines (capped), 2 build, 3 runtime; from then on every kind sits at its cap (5 + 3 + 4).
      expect(sizes).toEqual([10, 12, 12, 12]);
    });
  });

  it("reads each setting from the environment and names a bad one", () => {
    expect(retentionFromEnv({})).toEqual(DEFAULT_RETENTION);
    const s = retentionFromEnv({ LOG_RETENTION_LINES: "1000", LOG_RETENTION_REQUEST_LINES: "200000", AUDIT_RETENTION_DAYS: "30" });
    expect(s.logLines).toEqual({ build: 1000, runtime: 1000, request: 200_000 });
    expect(s.auditDays).toBe(30);
    expect(() => retentionFromEnv({ AUDIT_RETENTION_DAYS: "0" })).toThrow(/AUDIT_RETENTION_DAYS/);
    expect(() => retentionFromEnv({ NOTIFICATION_FEED_RETENTION_DAYS: "soon" })).toThrow(/NOTIFICATION_FEED_RETENTION_DAYS/);
    expect(() => retentionFromEnv({ LOG_RETENTION_BUILD_LINES: "5" })).toThrow(/LOG_RETENTION_BUILD_LINES/);
  });
});
