/**
 * The retention sweep: one pass over every table that grows with use, each kind
 * bounded by its setting (settings.ts). Every statement deletes (or gives up) at
 * most SWEEP_BATCH rows chosen by a LIMITed subquery and commits on its own, so
 * no statement holds many row locks or runs for long, and writers never wait on
 * a sweep; a kind stops after MAX_BATCHES per pass and finishes on the next.
 *
 * Upload sessions, their bytes and the artifacts of deployments that can no
 * longer be promoted are removed by the upload sweep (functions/projects/folder/
 * sweep.ts, functions/deployments/artifacts.ts), which holds the storage; it runs
 * beside this one (the Worker's cron, the self-hosted upload sweeper).
 */
import { type SQL, sql } from "drizzle-orm";
import { SESSION_IDLE_MS } from "../../../shared/auth/session";
import { rowsOf } from "../../../shared/db/rows";
import type { Db } from "../../../shared/db/types";
import { pruneIdempotencyKeys } from "../../../shared/http/idempotency";
import { pruneRateLimits } from "../../notifications/rate-limit";
import type { RetentionSettings } from "./settings";

export const SWEEP_BATCH = 5_000;
/** Statements per kind and pass: 1,000,000 rows at most, the rest on the next pass. */
const MAX_BATCHES = 200;

export interface SweepScope {
  /** Only these organizations' rows of the organization-owned tables (tests on a shared database); the others (sessions, codes, rate limits, keys) are swept whole. */
  orgIds?: string[];
}

export type SweepCounts = Record<
  | "sendsGivenUp"
  | "outbox"
  | "attempts"
  | "feed"
  | "events"
  | "audit"
  | "sessions"
  | "signInCodes"
  | "rateLimits"
  | "idempotencyKeys"
  | "logLinesByAge"
  | "logLinesByCap",
  number
>;

const DAY_MS = 86_400_000;
const before = (now: Date, days: number) => new Date(now.getTime() - days * DAY_MS).toISOString();

/** Runs `statement` (which answers `n`, the rows it touched) until a batch comes back short. */
async function inBatches(db: Db, statement: () => SQL | Promise<number>): Promise<number> {
  let total = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const s = statement();
    const n = s instanceof Promise ? await s : (rowsOf<{ n: number }>(await db.execute(s))[0]?.n ?? 0);
    total += n;
    if (n < SWEEP_BATCH) break;
  }
  return total;
}

/** `and <column> in (…orgIds)` when the sweep is scoped, else nothing. */
function orgFilter(column: SQL, scope: SweepScope): SQL {
  if (!scope.orgIds) return sql``;
  if (scope.orgIds.length === 0) return sql` and false`;
  return sql` and ${column} in (${sql.join(
    scope.orgIds.map((id) => sql`${id}`),
    sql`, `,
  )})`;
}

/** Deletes from `table` the rows whose `key` the LIMITed `pick` names; answers the count. */
const deleteWhere = (table: SQL, key: SQL, pick: SQL, recheck: SQL = sql``) => sql`
  with gone as (delete from ${table} where ${key} in (${pick} limit ${SWEEP_BATCH})${recheck} returning 1)
  select count(*)::int as n from gone`;

/**
 * A send still `pending` long after it was queued (deferred again and again by a
 * rate limit, or retried for days) is given up: failed, with the reason, so the
 * outbox retention removes it in time and the console shows why.
 */
function giveUpStaleSends(db: Db, s: RetentionSettings, now: Date, scope: SweepScope) {
  const cutoff = before(now, s.sendMaxAgeDays);
  return inBatches(
    db,
    () => sql`
      with gone as (
        update notification_outbox set status = 'failed', completed_at = ${now.toISOString()}::timestamptz, lease_token = null,
          last_error = ${`not sent within ${s.sendMaxAgeDays} days of being queued (NOTIFICATION_SEND_MAX_AGE_DAYS)`}
        where id in (select id from notification_outbox where status = 'pending' and created_at < ${cutoff}::timestamptz${orgFilter(sql`org_id`, scope)}
          limit ${SWEEP_BATCH} for update skip locked)
          and status = 'pending'
        returning 1)
      select count(*)::int as n from gone`,
  );
}

/** Finished sends, once they have been finished for outboxDays (their attempts go with them). */
function sweepOutbox(db: Db, s: RetentionSettings, now: Date, scope: SweepScope) {
  const cutoff = before(now, s.outboxDays);
  return inBatches(db, () =>
    deleteWhere(
      sql`notification_outbox`,
      sql`id`,
      sql`select id from notification_outbox where status in ('delivered', 'failed', 'cancelled')
        and coalesce(completed_at, created_at) < ${cutoff}::timestamptz${orgFilter(sql`org_id`, scope)}`,
    ),
  );
}

function sweepAttempts(db: Db, s: RetentionSettings, now: Date, scope: SweepScope) {
  const cutoff = before(now, s.attemptDays);
  const own = scope.orgIds ? sql` and outbox_id in (select id from notification_outbox where true${orgFilter(sql`org_id`, scope)})` : sql``;
  return inBatches(db, () =>
    deleteWhere(sql`notification_attempts`, sql`id`, sql`select id from notification_attempts where started_at < ${cutoff}::timestamptz${own}`),
  );
}

/** Feed entries older than feedDays, unless one of their sends is still under way. */
function sweepFeed(db: Db, s: RetentionSettings, now: Date, scope: SweepScope) {
  const cutoff = before(now, s.feedDays);
  return inBatches(db, () =>
    deleteWhere(
      sql`notification_deliveries`,
      sql`id`,
      sql`select d.id from notification_deliveries d where d.created_at < ${cutoff}::timestamptz${orgFilter(sql`d.org_id`, scope)}
        and not exists (select 1 from notification_outbox o where o.delivery_id = d.id and o.status in ('pending', 'sending'))`,
    ),
  );
}

/** An event is the payload of its feed entries and sends: it goes once none is left and it is older than notificationEventDays. */
function sweepEvents(db: Db, s: RetentionSettings, now: Date, scope: SweepScope) {
  const cutoff = before(now, s.notificationEventDays);
  return inBatches(db, () =>
    deleteWhere(
      sql`notification_events`,
      sql`id`,
      sql`select e.id from notification_events e where e.created_at < ${cutoff}::timestamptz${orgFilter(sql`e.org_id`, scope)}
        and not exists (select 1 from notification_deliveries d where d.event_id = e.id)
        and not exists (select 1 from notification_outbox o where o.event_id = e.id)`,
    ),
  );
}

function sweepAudit(db: Db, s: RetentionSettings, now: Date, scope: SweepScope) {
  const cutoff = before(now, s.auditDays);
  return inBatches(db, () =>
    deleteWhere(sql`audit_log`, sql`id`, sql`select id from audit_log where created_at < ${cutoff}::timestamptz${orgFilter(sql`org_id`, scope)}`),
  );
}

/** Sessions past their absolute expiry or idle longer than SESSION_IDLE_MS: they can never be used again. */
function sweepSessions(db: Db, now: Date) {
  const idle = new Date(now.getTime() - SESSION_IDLE_MS).toISOString();
  const at = now.toISOString();
  return inBatches(db, () =>
    deleteWhere(sql`sessions`, sql`id`, sql`select id from sessions where expires_at < ${at}::timestamptz or last_seen_at < ${idle}::timestamptz`),
  );
}

/** Expired sign-in codes; re-checked on the row, so a code an address just asked for again stays. */
function sweepSignInCodes(db: Db, now: Date) {
  const at = now.toISOString();
  return inBatches(db, () =>
    deleteWhere(
      sql`sign_in_codes`,
      sql`email`,
      sql`select email from sign_in_codes where expires_at < ${at}::timestamptz`,
      sql` and expires_at < ${at}::timestamptz`,
    ),
  );
}

/** Project filter of the log sweeps when scoped. */
const projectFilter = (column: SQL, scope: SweepScope) =>
  scope.orgIds ? sql` and ${column} in (select id from projects where true${orgFilter(sql`org_id`, scope)})` : sql``;

async function sweepLogAge(db: Db, s: RetentionSettings, now: Date, scope: SweepScope): Promise<number> {
  const cutoff = before(now, s.logDays);
  const lines = await inBatches(db, () =>
    deleteWhere(
      sql`log_lines`,
      sql`(project_id, seq)`,
      sql`select project_id, seq from log_lines where at < ${cutoff}::timestamptz${projectFilter(sql`project_id`, scope)}`,
    ),
  );
  return lines + (await sweepRequestAge(db, cutoff, scope));
}

/** Request batches whose newest line is older than the cutoff (a batch spans one flush of the edge's writer: 50 ms). Answers the lines removed. */
async function sweepRequestAge(db: Db, cutoff: string, scope: SweepScope): Promise<number> {
  let lines = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const [row] = rowsOf<{ batches: number; lines: number }>(
      await db.execute(sql`
        with gone as (delete from request_log_batches where (project_id, first_seq) in (
            select project_id, first_seq from request_log_batches where last_at < ${cutoff}::timestamptz${projectFilter(sql`project_id`, scope)}
            limit ${SWEEP_BATCH})
          returning last_seq - first_seq + 1 as n)
        select count(*)::int as batches, coalesce(sum(n), 0)::int as lines from gone`),
    );
    lines += row?.lines ?? 0;
    if ((row?.batches ?? 0) < SWEEP_BATCH) break;
  }
  return lines;
}

/**
 * Per project and kind, all but the newest `cap` lines: each kind has its own
 * cap, so request lines never push build lines out. Only projects with more
 * lines in all than the smallest cap are looked at; the oldest line to keep is
 * found on the (project, kind, seq) index, and the older ones go in batches.
 * Request lines are stored by the batch (request_log_batches): sweepRequestCap.
 */
async function sweepLogCaps(db: Db, s: RetentionSettings, scope: SweepScope): Promise<number> {
  const smallest = Math.min(s.logLines.build, s.logLines.runtime, s.logLines.request);
  const candidates = rowsOf<{ project_id: string }>(
    await db.execute(sql`select project_id from log_sequences where last > ${smallest}${projectFilter(sql`project_id`, scope)}`),
  );
  let total = 0;
  for (const { project_id: projectId } of candidates) {
    for (const kind of ["build", "runtime"] as const) {
      const cap = s.logLines[kind];
      const [edge] = rowsOf<{ seq: string | number }>(
        await db.execute(sql`select seq from log_lines where project_id = ${projectId} and kind = ${kind} order by seq desc offset ${cap} limit 1`),
      );
      if (!edge) continue;
      const last = Number(edge.seq);
      total += await inBatches(db, () =>
        deleteWhere(
          sql`log_lines`,
          sql`(project_id, seq)`,
          sql`select project_id, seq from log_lines where project_id = ${projectId} and kind = ${kind} and seq <= ${last} order by seq`,
        ),
      );
    }
    total += await sweepRequestCap(db, projectId, s.logLines.request);
  }
  return total;
}

/**
 * A project's request lines beyond the newest `cap`: the batches wholly older go, and the batch
 * holding the oldest line to keep loses its older lines (its text cut, its first number and time
 * moved), so exactly `cap` stay.
 */
async function sweepRequestCap(db: Db, projectId: string, cap: number): Promise<number> {
  const [edge] = rowsOf<{ first_seq: string | number; last_seq: string | number; upto: string | number }>(
    await db.execute(sql`
      select first_seq, last_seq, upto from (
        select first_seq, last_seq, sum(last_seq - first_seq + 1) over (order by first_seq desc) as upto
        from request_log_batches where project_id = ${projectId}) w
      where upto > ${cap} order by first_seq desc limit 1`),
  );
  if (!edge) return 0;
  const first = Number(edge.first_seq);
  const last = Number(edge.last_seq);
  // Lines of this batch that are among the newest `cap`.
  const keep = cap - (Number(edge.upto) - (last - first + 1));
  let removed = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const [row] = rowsOf<{ batches: number; lines: number }>(
      await db.execute(sql`
        with gone as (delete from request_log_batches where project_id = ${projectId} and first_seq in (
            select first_seq from request_log_batches where project_id = ${projectId} and first_seq < ${keep > 0 ? first : first + 1}
            order by first_seq limit ${SWEEP_BATCH})
          returning last_seq - first_seq + 1 as n)
        select count(*)::int as batches, coalesce(sum(n), 0)::int as lines from gone`),
    );
    removed += row?.lines ?? 0;
    if ((row?.batches ?? 0) < SWEEP_BATCH) break;
  }
  if (keep > 0 && keep < last - first + 1) removed += await trimRequestBatch(db, projectId, first, keep);
  return removed;
}

/** Keeps the newest `keep` lines of one batch (its text cut after the older lines' newlines: request-lines.ts); answers the lines cut. */
async function trimRequestBatch(db: Db, projectId: string, firstSeq: number, keep: number): Promise<number> {
  const [row] = rowsOf<{ lines: string; last_seq: string | number }>(
    await db.execute(sql`select lines, last_seq from request_log_batches where project_id = ${projectId} and first_seq = ${firstSeq}`),
  );
  if (!row) return 0;
  const lastSeq = Number(row.last_seq);
  const cut = lastSeq - firstSeq + 1 - keep;
  let at = 0;
  for (let i = 0; i < cut; i++) at = row.lines.indexOf("\n", at) + 1;
  const kept = row.lines.slice(at);
  // A line starts with its time in milliseconds (request-lines.ts).
  const firstAt = new Date(Number(kept.slice(0, kept.indexOf("\t"))));
  await db.execute(sql`
    update request_log_batches set first_seq = ${lastSeq - keep + 1}, first_at = ${firstAt.toISOString()}::timestamptz, lines = ${kept}
    where project_id = ${projectId} and first_seq = ${firstSeq}`);
  return cut;
}

/**
 * One pass over every kind, in an order where a parent's rule sees its children
 * already swept (sends before feed entries before events). A kind that fails is
 * reported in `failed` and the others still run.
 */
export async function sweepRetention(
  db: Db,
  settings: RetentionSettings,
  now: Date,
  scope: SweepScope = {},
): Promise<{ removed: SweepCounts; failed: Partial<Record<keyof SweepCounts, string>> }> {
  const steps: Array<[keyof SweepCounts, () => Promise<number>]> = [
    ["sendsGivenUp", () => giveUpStaleSends(db, settings, now, scope)],
    ["outbox", () => sweepOutbox(db, settings, now, scope)],
    ["attempts", () => sweepAttempts(db, settings, now, scope)],
    ["feed", () => sweepFeed(db, settings, now, scope)],
    ["events", () => sweepEvents(db, settings, now, scope)],
    ["audit", () => sweepAudit(db, settings, now, scope)],
    ["sessions", () => sweepSessions(db, now)],
    ["signInCodes", () => sweepSignInCodes(db, now)],
    ["rateLimits", () => inBatches(db, () => pruneRateLimits(db, now, SWEEP_BATCH))],
    ["idempotencyKeys", () => inBatches(db, () => pruneIdempotencyKeys(db, now, SWEEP_BATCH))],
    ["logLinesByAge", () => sweepLogAge(db, settings, now, scope)],
    ["logLinesByCap", () => sweepLogCaps(db, settings, scope)],
  ];
  const removed = {} as SweepCounts;
  const failed: Partial<Record<keyof SweepCounts, string>> = {};
  for (const [kind, step] of steps) {
    try {
      removed[kind] = await step();
    } catch (e) {
      removed[kind] = 0;
      failed[kind] = e instanceof Error ? e.message : String(e);
    }
  }
  return { removed, failed };
}
