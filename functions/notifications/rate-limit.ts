/**
 * Fixed-window rate limits kept in Postgres (`rate_limits`), so they hold across
 * several Node processes and stateless Worker invocations alike.
 *
 * A window starts at a key's first use after the previous one ended and lasts
 * `windowMs`; at most `max` units are granted in it. Several keys are taken in
 * ONE statement (INSERT … ON CONFLICT DO UPDATE … RETURNING): the row lock
 * serializes concurrent takers, so exactly `max` units pass however many
 * processes race. Keys are processed in sorted order, so two statements never
 * wait on each other's rows in opposite orders (no deadlock).
 */
import { sql } from "drizzle-orm";
import type { Executor } from "../../shared/db/types";
import { rowsOf } from "../../shared/db/rows";
import type { AppContext } from "../../shared/http/context";

export interface RateLimit {
  max: number;
  windowMs: number;
}

export interface Take extends RateLimit {
  key: string;
  /** Units wanted (default 1). */
  n?: number;
}

export interface Granted {
  /** Units granted now (0..n). */
  granted: number;
  /** When the key's current window ends (the earliest time more can be granted once exhausted). */
  windowEnd: Date;
  /** Units granted in the current window so far, this take included. */
  count: number;
}

/** Takes up to `n` units of each key at `now`; returns what each key granted. Keys must be distinct. */
export async function takeRateLimits(db: Executor, takes: Take[], now: Date): Promise<Map<string, Granted>> {
  if (takes.length === 0) return new Map();
  const at = sql`${now.toISOString()}::timestamptz`;
  const values = sql.join(
    takes.map((t) => sql`(${t.key}::text, ${t.n ?? 1}::int, ${t.max}::int, ${t.windowMs}::int)`),
    sql`, `,
  );
  // `excluded.granted` is least(n, max): as a grant is at most max - count, it stands for n.
  const limitOf = sql`(select q.max from req q where q.key = r.key)`;
  const result = await db.execute(sql`
    with req (key, n, max, window_ms) as (values ${values})
    insert into rate_limits as r (key, window_end, count, granted)
    select key, ${at} + window_ms * interval '1 millisecond', least(n, max), least(n, max) from req order by key
    on conflict (key) do update set
      window_end = case when r.window_end <= ${at} then excluded.window_end else r.window_end end,
      granted = case when r.window_end <= ${at} then excluded.granted else least(excluded.granted, greatest(0, ${limitOf} - r.count)) end,
      count = case when r.window_end <= ${at} then excluded.count else r.count + least(excluded.granted, greatest(0, ${limitOf} - r.count)) end
    returning key, granted, window_end, count`);
  return new Map(
    rowsOf<{ key: string; granted: number; window_end: string | Date; count: number }>(result).map((r) => [
      r.key,
      { granted: Number(r.granted), windowEnd: new Date(r.window_end), count: Number(r.count) },
    ]),
  );
}

/**
 * Gives back units granted but not used (another key of the same action was
 * exhausted), if their window is still the current one. Rows are locked in key
 * order, like takeRateLimits.
 */
export async function returnRateLimits(db: Executor, returns: Array<{ key: string; n: number; windowEnd: Date }>): Promise<void> {
  const wanted = returns.filter((r) => r.n > 0);
  if (wanted.length === 0) return;
  const values = sql.join(
    wanted.map((r) => sql`(${r.key}::text, ${r.n}::int, ${r.windowEnd.toISOString()}::timestamptz)`),
    sql`, `,
  );
  await db.execute(sql`
    with back (key, n, window_end) as (values ${values}),
    locked as (select key from rate_limits where key in (select key from back) order by key for update)
    update rate_limits r set count = greatest(0, r.count - b.n)
    from back b
    where r.key = b.key and r.key in (select key from locked) and r.window_end = b.window_end`);
}

/** Deletes windows that ended before `now` (a later use starts a new one anyway); at most `limit` rows. */
export async function pruneRateLimits(db: Executor, now: Date, limit = 5_000): Promise<number> {
  const result = await db.execute(sql`
    with gone as (
      delete from rate_limits where key in (select key from rate_limits where window_end < ${now.toISOString()}::timestamptz limit ${limit})
        -- re-checked on the row deleted: a window a concurrent take just renewed stays
        and window_end < ${now.toISOString()}::timestamptz
      returning 1
    ) select count(*)::int as n from gone`);
  return rowsOf<{ n: number }>(result)[0]?.n ?? 0;
}

/** Whole seconds until `windowEnd`, at least 1 (a Retry-After value). */
export function retryAfterSeconds(windowEnd: Date, now: Date): number {
  return Math.max(1, Math.ceil((windowEnd.getTime() - now.getTime()) / 1000));
}

/** Where one limit of a request stands after its take: units granted in the window so far, and when it ends. */
export interface LimitState {
  max: number;
  count: number;
  windowEnd: Date;
}

/**
 * The one place API answers get their rate-limit headers: `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset` (seconds) of the IETF
 * httpapi-ratelimit-headers draft, describing the request's limit closest to
 * exhaustion (on a tie the one that resets last, so a 429's `RateLimit-Reset`
 * equals its `Retry-After`). Set on the context, they go out with the answer,
 * a 429 problem included; that problem adds `Retry-After` itself (tooManyRequests).
 */
export function setRateLimitHeaders(c: AppContext, states: LimitState[], now: Date): void {
  const tightest = states.reduce<LimitState | undefined>((best, s) => {
    if (!best) return s;
    const left = Math.max(0, s.max - s.count);
    const bestLeft = Math.max(0, best.max - best.count);
    return left < bestLeft || (left === bestLeft && s.windowEnd > best.windowEnd) ? s : best;
  }, undefined);
  if (!tightest) return;
  c.header("ratelimit-limit", String(tightest.max));
  c.header("ratelimit-remaining", String(Math.max(0, tightest.max - tightest.count)));
  c.header("ratelimit-reset", String(retryAfterSeconds(tightest.windowEnd, now)));
}

/**
 * Takes one unit of every limit of an API request, all or none (when one is
 * exhausted the units taken from the others are given back), and sets the
 * RateLimit-* headers. null: granted; otherwise the exhausted take and the
 * seconds until it allows one again (the caller throws its 429 with them).
 */
export async function takeApiLimits(c: AppContext, takes: Take[], now: Date): Promise<{ denied: Take; retryAfter: number } | null> {
  const db = c.get("db");
  const got = await takeRateLimits(db, takes, now);
  const denied = takes.filter((t) => (got.get(t.key)?.granted ?? 0) < 1);
  const giveBack = denied.length > 0 ? takes.filter((t) => !denied.includes(t)) : [];
  await returnRateLimits(
    db,
    giveBack.map((t) => ({ key: t.key, n: 1, windowEnd: got.get(t.key)!.windowEnd })),
  );
  setRateLimitHeaders(
    c,
    takes.map((t) => {
      const g = got.get(t.key)!;
      return { max: t.max, count: g.count - (giveBack.includes(t) ? 1 : 0), windowEnd: g.windowEnd };
    }),
    now,
  );
  if (denied.length === 0) return null;
  const last = denied.reduce((a, b) => (got.get(b.key)!.windowEnd > got.get(a.key)!.windowEnd ? b : a));
  return { denied: last, retryAfter: retryAfterSeconds(got.get(last.key)!.windowEnd, now) };
}
