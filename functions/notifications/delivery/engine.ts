/**
 * The delivery engine: drains the outbox (`notification_outbox`).
 *
 * - Claim: one UPDATE over a `FOR UPDATE SKIP LOCKED` sub-select moves due rows
 *   to `sending` with a lease (`due_at` = lease end, a random `lease_token`) and
 *   counts the attempt. Several engines (Node processes, Worker invocations)
 *   never claim the same row; a row whose engine died is claimed again when its
 *   lease ends.
 * - Send: one attempt per claim, through the injected transports.
 * - Record: one statement writes the attempt row and moves the send to
 *   delivered / pending (retry at the backoff time) / failed, only while the
 *   lease is still ours; under load one statement records every outcome that
 *   arrived while the previous one was written.
 *
 * Rate limits: before sending a claimed batch, one statement takes a unit per
 * send of its channel's and its organization's delivery budget (see
 * ../limits.ts, counted in `rate_limits` across processes). A send over a limit
 * is not dropped: it goes back to `pending`, due when the exhausted window
 * ends, and gets its claim's attempt back (nothing was sent, no attempt row).
 * The deferral is written under the claim's lease like any outcome, so a send
 * is still sent by one engine at a time, with its one webhook-id.
 *
 * Retries: network errors, timeouts, 408, 429 and 5xx (SMTP 4xx for e-mail),
 * after `baseDelayMs · 4^(attempt-1)` ±20 % jitter, at most `maxDelayMs`; a
 * Retry-After header is honoured instead (capped at `maxDelayMs`). After
 * `maxAttempts` the send is failed. Redirects, other 4xx and refused
 * destinations fail at once. A send whose channel was deleted, disabled or
 * unverified meanwhile is cancelled.
 *
 * Delivery is at-least-once: a process killed after the destination received a
 * send but before recording it sends it again after the lease; the
 * `webhook-id` (the send id) is the same, so receivers can drop the duplicate.
 */
import { eq, inArray, sql } from "drizzle-orm";
import type { Keyring } from "../../../shared/crypto/keyring";
import { rowsOf } from "../../../shared/db/rows";
import { notificationChannels, notificationEvents, notificationOutbox, type SendStatus } from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";
import type { Logger } from "../../../shared/http/logger";
import { newId } from "../../../shared/ids";
import type { OutboundResult } from "../../../shared/outbound/types";
import { toBase64Url, randomBytes } from "../../../shared/crypto/encoding";
import { categoryOf } from "../categories";
import { DELIVERY_LIMITS, deliveryTakes, describeLimit, type DeliveryLimits } from "../limits";
import { pruneRateLimits, returnRateLimits, takeRateLimits, type Take } from "../rate-limit";
import { pruneIdempotencyKeys } from "../../../shared/http/idempotency";
import type { NotificationMessage } from "./payloads";
import { sendToChannel, type Transports } from "./send";
import { describeError } from "../../../shared/http/error-log";

export interface DeliveryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** How long a claim holds a send; must exceed the send timeout times batchSize / concurrency. */
  leaseMs: number;
  batchSize: number;
  /** Sends in flight at once within a batch. */
  concurrency: number;
  /** Batches in flight at once (see drain): up to lanes × concurrency sends. */
  lanes: number;
  /** Delivery rate limits per channel and per organization. */
  limits: DeliveryLimits;
}

export const DEFAULT_POLICY: DeliveryPolicy = {
  maxAttempts: 6,
  baseDelayMs: 5_000,
  maxDelayMs: 3_600_000,
  leaseMs: 120_000,
  // 64 / 32: a batch's statements (claim, load, limits, record) are shared by twice the sends of 32 / 16, which
  // took the fan-out bench from 2.4 s to 1.8 s (5,000 webhooks) and its CPU per send from ~280 to ~220 µs.
  batchSize: 64,
  concurrency: 32,
  lanes: 4,
  limits: DELIVERY_LIMITS,
};

// Stale rate-limit windows and expired Idempotency-Keys are deleted at most this often per engine (each Worker drain is a new engine), a batch of each.
const PRUNE_EVERY_MS = 60_000;

export interface EngineDeps {
  db: Db;
  keyring: Keyring;
  transports: Transports;
  logger: Logger;
  clock?: () => Date;
  policy?: Partial<Omit<DeliveryPolicy, "limits">> & { limits?: Partial<DeliveryLimits> };
  random?: () => number;
}

export interface DrainResult {
  /** Sends attempted (or cancelled) in this drain. */
  processed: number;
  /** When the next pending send is due, if any. */
  nextDueAt: Date | null;
}

export interface DeliveryEngine {
  /** Delivers what is due; with `lingerMs`, waits for sends due that soon (within `budgetMs`). */
  drain(options?: { budgetMs?: number; lingerMs?: number }): Promise<DrainResult>;
  /** Node: poll the outbox in the background until stop(). */
  start(options?: { pollMs?: number }): void;
  /** Deliver now instead of at the next poll (new sends were queued). */
  wake(): void;
  /** Stops polling; sends in flight finish and are recorded first. */
  stop(): Promise<void>;
  /** Claims due sends without sending them (tests simulate a crash after a claim with it). */
  claim(limit: number): Promise<string[]>;
}

interface Claimed {
  id: string;
  attempts: number;
}

type Loaded = Awaited<ReturnType<typeof load>>[number];

async function load(db: Db, ids: string[]) {
  return db
    .select({
      id: notificationOutbox.id,
      orgId: notificationOutbox.orgId,
      kind: notificationOutbox.kind,
      event: notificationEvents,
      channel: notificationChannels,
    })
    .from(notificationOutbox)
    .innerJoin(notificationEvents, eq(notificationEvents.id, notificationOutbox.eventId))
    .leftJoin(notificationChannels, eq(notificationChannels.id, notificationOutbox.channelId))
    .where(inArray(notificationOutbox.id, ids));
}

export function messageOf(event: typeof notificationEvents.$inferSelect): NotificationMessage {
  return {
    eventId: event.id,
    organizationId: event.orgId,
    category: event.category,
    categoryLabel: categoryOf(event.category)?.label ?? event.category,
    title: event.title,
    message: event.message,
    projectId: event.projectId,
    data: event.data,
    createdAt: event.createdAt,
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function createDeliveryEngine(deps: EngineDeps): DeliveryEngine {
  const policy: DeliveryPolicy = { ...DEFAULT_POLICY, ...deps.policy, limits: { ...DEFAULT_POLICY.limits, ...deps.policy?.limits } };
  const clock = deps.clock ?? (() => new Date());
  const random = deps.random ?? Math.random;
  const { db, logger } = deps;

  let stopping = false;
  let loop: Promise<void> | undefined;
  let wakeUp: (() => void) | undefined;
  let woken = false;
  let prunedAt = -Infinity;

  function retryDelayMs(attempt: number, retryAfterSeconds?: number): number {
    if (retryAfterSeconds !== undefined) return Math.min(retryAfterSeconds * 1000, policy.maxDelayMs);
    const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 4 ** (attempt - 1));
    return Math.min(policy.maxDelayMs, Math.round(exp * (0.8 + 0.4 * random())));
  }

  async function claimBatch(limit: number): Promise<{ token: string; rows: Claimed[] }> {
    const now = clock();
    const token = toBase64Url(randomBytes(12));
    const leaseUntil = new Date(now.getTime() + policy.leaseMs);
    const result = await db.execute(sql`
      update notification_outbox o
      set status = 'sending', due_at = ${leaseUntil.toISOString()}::timestamptz, lease_token = ${token}, attempts = o.attempts + 1
      from (
        select id from notification_outbox
        where status in ('pending', 'sending') and due_at <= ${now.toISOString()}::timestamptz
        order by due_at
        limit ${limit}
        for update skip locked
      ) due
      where o.id = due.id
      returning o.id, o.attempts`);
    return { token, rows: rowsOf<Claimed>(result) };
  }

  interface Outcome {
    send: Claimed;
    token: string;
    status: SendStatus;
    started: Date;
    durationMs: number;
    result: OutboundResult | null;
    nextAt: Date | null;
    error: string | null;
    /** false: nothing was sent (cancelled, deferred): the claim's attempt is given back, no attempt row. */
    attempted: boolean;
  }

  /**
   * Outcomes are written as they come in, several per statement under load
   * (whatever finished while the previous write ran): one statement moves the
   * sends, only while their lease is still ours, and appends the attempt rows.
   * Each send waits for its own write, so nothing is acknowledged unrecorded.
   */
  const queue: Array<{ outcome: Outcome; done: (kept: boolean) => void; fail: (e: unknown) => void }> = [];
  let writing = false;

  function record(outcome: Outcome): Promise<boolean> {
    return new Promise<boolean>((done, fail) => {
      queue.push({ outcome, done, fail });
      if (!writing) void writeQueued();
    });
  }

  async function writeQueued(): Promise<void> {
    writing = true;
    try {
      while (queue.length > 0) {
        const items = queue.splice(0, 200);
        try {
          const kept = await writeOutcomes(items.map((i) => i.outcome));
          for (const i of items) i.done(kept.has(i.outcome.send.id));
        } catch (e) {
          for (const i of items) i.fail(e);
        }
      }
    } finally {
      writing = false;
    }
  }

  async function writeOutcomes(outcomes: Outcome[]): Promise<Set<string>> {
    const completedAt = clock().toISOString();
    // The outcomes go as one JSON parameter (json_to_recordset), not 13 bound values per row: building and
    // binding a few thousand parameters per statement was a visible part of the engine's CPU per send.
    const rows = outcomes.map((o) => ({
      id: o.send.id,
      token: o.token,
      status: o.status,
      next_at: o.nextAt?.toISOString() ?? null,
      error: o.error,
      code: o.result?.ok === true ? o.result.status : (o.result?.status ?? null),
      completed_at: o.status === "pending" ? null : completedAt,
      attempt_id: newId("natt"),
      attempt: o.send.attempts,
      started_at: o.started.toISOString(),
      duration_ms: o.durationMs,
      outcome: o.status === "delivered" ? "delivered" : o.status === "pending" ? "retry" : "failed",
      attempted: o.attempted,
    }));
    // A send not attempted (cancelled, deferred) gives its claim's attempt back and gets no attempt row.
    const result = await db.execute(sql`
      with input as (
        select * from json_to_recordset(${JSON.stringify(rows)}::json) as i(id text, token text, status text, next_at timestamptz,
          error text, code int, completed_at timestamptz, attempt_id text, attempt int, started_at timestamptz, duration_ms int,
          outcome text, attempted boolean)
      ), updated as (
        update notification_outbox o
        set status = i.status,
            due_at = coalesce(i.next_at, o.due_at),
            lease_token = null,
            attempts = o.attempts - case when i.attempted then 0 else 1 end,
            last_error = i.error,
            last_status_code = i.code,
            completed_at = i.completed_at
        from input i
        where o.id = i.id and o.lease_token = i.token
        returning o.id
      ), attempts as (
        insert into notification_attempts (id, outbox_id, attempt, started_at, duration_ms, outcome, status_code, error, next_attempt_at)
        select attempt_id, id, attempt, started_at, duration_ms, outcome, code, error, next_at from input where attempted
      )
      select id from updated`);
    return new Set(rowsOf<{ id: string }>(result).map((r) => r.id));
  }

  async function processOne(send: Claimed, row: Loaded | undefined, token: string, deferral: Deferral | undefined): Promise<void> {
    const started = clock();
    const finish = async (
      status: SendStatus,
      result: OutboundResult | null,
      error: string | null,
      nextAt: Date | null = null,
      attempted = status !== "cancelled",
    ) => {
      const kept = await record({ send, token, status, started, durationMs: clock().getTime() - started.getTime(), result, nextAt, error, attempted });
      if (!kept) logger.error("notification send lease lost", { sendId: send.id });
      if (status !== "delivered") {
        logger.info("notification send not delivered", { sendId: send.id, kind: row?.kind, attempt: send.attempts, status, error });
      }
    };
    if (!row) return; // deleted (event or organization) since the claim
    if (!row.channel) return finish("cancelled", null, "The channel was deleted");
    if (!row.channel.enabled) return finish("cancelled", null, "The channel is disabled");
    if (!row.channel.verified) return finish("cancelled", null, "The channel is not verified");
    if (send.attempts > policy.maxAttempts) return finish("failed", null, `Gave up after ${policy.maxAttempts} attempts`);
    if (deferral) return finish("pending", null, deferral.reason, deferral.until, false);

    let result: OutboundResult;
    try {
      result = await sendToChannel(row.channel, messageOf(row.event), send.id, started, deps.keyring, deps.transports);
    } catch {
      result = { ok: false, retryable: true, error: "The send failed unexpectedly" };
    }
    if (result.ok) return finish("delivered", result, null);
    if (result.retryable && send.attempts < policy.maxAttempts) {
      const nextAt = new Date(started.getTime() + retryDelayMs(send.attempts, result.retryAfterSeconds));
      return finish("pending", result, result.error, nextAt);
    }
    return finish("failed", result, result.retryable ? `${result.error} (gave up after ${send.attempts} attempts)` : result.error);
  }

  interface Deferral {
    until: Date;
    reason: string;
  }

  /**
   * Takes, in one statement, a unit of each key every sendable row of the batch
   * needs (its channel's and its organization's); a send goes ahead only with
   * both, in claim order, and units taken but not used are given back. The
   * others are deferred to the end of the window that stopped them.
   */
  async function applyLimits(batch: Claimed[], rows: Map<string, Loaded>): Promise<Map<string, Deferral>> {
    const deferred = new Map<string, Deferral>();
    const wanted: Array<{ send: Claimed; takes: Take[] }> = [];
    const byKey = new Map<string, Take & { n: number }>();
    for (const send of batch) {
      const channel = rows.get(send.id)?.channel;
      if (!channel?.enabled || !channel.verified || channel.kind === "in_app" || send.attempts > policy.maxAttempts) continue;
      const takes = deliveryTakes(policy.limits, channel.orgId, channel.id, channel.kind);
      wanted.push({ send, takes });
      for (const t of takes) {
        const agg = byKey.get(t.key);
        if (agg) agg.n++;
        else byKey.set(t.key, { ...t, n: 1 });
      }
    }
    if (wanted.length === 0) return deferred;
    const got = await takeRateLimits(db, [...byKey.values()], clock());
    const left = new Map([...byKey.keys()].map((k) => [k, got.get(k)?.granted ?? 0]));
    for (const { send, takes } of wanted) {
      const exhausted = takes.filter((t) => left.get(t.key)! < 1);
      if (exhausted.length === 0) {
        for (const t of takes) left.set(t.key, left.get(t.key)! - 1);
        continue;
      }
      const until = new Date(Math.max(...exhausted.map((t) => got.get(t.key)?.windowEnd.getTime() ?? clock().getTime() + t.windowMs)));
      const first = exhausted[0]!;
      const scope = first === takes[0] ? "the channel's" : "the organization's";
      deferred.set(send.id, { until, reason: `Deferred: ${scope} delivery limit (${describeLimit(first)}) was reached` });
    }
    await returnRateLimits(
      db,
      [...left].filter(([, n]) => n > 0).map(([key, n]) => ({ key, n, windowEnd: got.get(key)!.windowEnd })),
    );
    return deferred;
  }

  async function pruneLimits(): Promise<void> {
    const now = clock();
    if (now.getTime() - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = now.getTime();
    try {
      await pruneRateLimits(db, now);
      await pruneIdempotencyKeys(db, now);
    } catch (e) {
      logger.error("rate-limit prune failed", describeError(e));
    }
  }

  async function processBatch(token: string, batch: Claimed[]): Promise<void> {
    const rows = new Map(
      (
        await load(
          db,
          batch.map((b) => b.id),
        )
      ).map((r) => [r.id, r]),
    );
    const deferred = await applyLimits(batch, rows);
    let next = 0;
    const worker = async () => {
      while (next < batch.length) {
        const send = batch[next++]!;
        try {
          await processOne(send, rows.get(send.id), token, deferred.get(send.id));
        } catch (e) {
          // Left `sending`: claimed again when the lease ends.
          logger.error("notification send could not be recorded", { sendId: send.id, ...describeError(e) });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(policy.concurrency, batch.length) }, worker));
  }

  async function nextDueAt(): Promise<Date | null> {
    const [row] = rowsOf<{ at: string | Date | null }>(
      await db.execute(sql`select min(due_at) as at from notification_outbox where status in ('pending', 'sending')`),
    );
    return row?.at ? new Date(row.at) : null;
  }

  async function drain(options: { budgetMs?: number; lingerMs?: number } = {}): Promise<DrainResult> {
    const deadline = Date.now() + (options.budgetMs ?? 25_000);
    let processed = 0;
    await pruneLimits();
    // Each lane claims, sends and records a batch after another; with several, one batch's database round trips
    // overlap another's sends (one lane left the engine waiting on the database most of the time). A lane stops
    // when its claim finds nothing due or the budget is spent.
    const lane = async () => {
      while (!stopping && Date.now() < deadline) {
        const { token, rows } = await claimBatch(policy.batchSize);
        if (rows.length === 0) return;
        await processBatch(token, rows);
        processed += rows.length;
      }
    };
    while (!stopping) {
      // Every lane ends before the drain does (a failing one must not leave the others running past it).
      const failed = (await Promise.allSettled(Array.from({ length: policy.lanes }, lane))).find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
      if (stopping) break;
      if (Date.now() >= deadline) return { processed, nextDueAt: await nextDueAt() };
      const due = await nextDueAt();
      const wait = due ? due.getTime() - clock().getTime() : Infinity;
      if (due && wait <= (options.lingerMs ?? 0) && Date.now() + wait < deadline) {
        await sleep(Math.max(wait, 5));
        continue;
      }
      return { processed, nextDueAt: due };
    }
    return { processed, nextDueAt: null };
  }

  function waitForWake(ms: number): Promise<void> {
    if (woken) {
      woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeUp = undefined;
        woken = false;
        resolve();
      }
      wakeUp = done;
    });
  }

  return {
    drain,
    claim: async (limit) => (await claimBatch(limit)).rows.map((r) => r.id),
    start({ pollMs = 1_000 } = {}) {
      if (loop) return;
      stopping = false;
      loop = (async () => {
        while (!stopping) {
          let due: Date | null = null;
          try {
            ({ nextDueAt: due } = await drain({ budgetMs: 30_000 }));
          } catch (e) {
            logger.error("notification delivery failed", describeError(e));
          }
          if (stopping) break;
          const untilDue = due ? due.getTime() - clock().getTime() : pollMs;
          await waitForWake(Math.max(0, Math.min(pollMs, untilDue)));
        }
      })();
    },
    wake() {
      if (wakeUp) wakeUp();
      else woken = true;
    },
    async stop() {
      stopping = true;
      wakeUp?.();
      await loop;
      loop = undefined;
    },
  };
}
