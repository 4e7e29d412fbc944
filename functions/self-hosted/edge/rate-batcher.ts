/**
 * Coalesces the edge's rate-limit takes. Every request a rate-limit rule matches
 * needs one unit of its counter row; one statement per request would queue all
 * concurrent requests of a busy client on that row's lock, one commit each. Here
 * at most one statement per counter key is in flight per process: requests that
 * arrive meanwhile wait and the next statement takes as many units as there are
 * waiters (`n`), granting them in arrival order. Each statement grants
 * atomically up to the limit, so the count is shared by every process on one
 * database.
 *
 * Leases, for large limits only (at least LEASE_MIN_LIMIT units per window): a
 * statement also takes a few units ahead, which the next requests of that key
 * are granted from without waiting for the database (the lease grows while the
 * key stays busy, up to 1/LEASE_FRACTION of the limit, and is topped up in the
 * background before it runs out). A request then costs no round trip, so a
 * generous limit adds no latency. The limit still holds exactly: a unit is
 * granted only once the database counted it. What a lease trades is the other
 * direction: with several processes, units one process leased and did not use
 * before the window ended are not available to the others, so a client may be
 * refused up to (processes - 1) × limit / LEASE_FRACTION units early. One
 * process is exact. Limits below LEASE_MIN_LIMIT never lease: they take exactly
 * what waits, whatever the number of processes.
 */
import type { Db } from "../../../shared/db/types";
import { takeRateLimits } from "../../notifications/rate-limit";

export interface TakeResult {
  ok: boolean;
  /** When the window ends, in ms (a number: a request granted from a lease allocates no Date). */
  windowEnd: number;
}

/** Limits (units per window) from which a process leases units ahead. */
export const LEASE_MIN_LIMIT = 1000;
/** A lease is at most this fraction of the limit. */
export const LEASE_FRACTION = 64;
const FIRST_LEASE = 8;

interface Waiter {
  resolve(r: TakeResult): void;
  reject(e: unknown): void;
}

interface Key {
  max: number;
  windowMs: number;
  waiting: Waiter[];
  /** A statement for this key is in flight. */
  busy: boolean;
  /** Units this process holds (counted by the database, not yet granted), valid until windowEnd. */
  leased: number;
  /** The next lease's size (grows while the key is busy; 0: no leasing for this limit). */
  leaseSize: number;
  windowEnd: number;
  /** The database granted less than asked: the window is used up, refuse locally until it ends. */
  full: boolean;
}

/** A result at once when it is known without the database (a lease, or a window known to be used up); else a promise. */
/** `now`: the caller's reading of the same clock (ms), so a request with several limits reads it once. */
export type TakeOne = (key: string, max: number, windowMs: number, now?: number) => TakeResult | Promise<TakeResult>;

export function createRateBatcher(db: Db, clock: () => Date): TakeOne {
  const keys = new Map<string, Key>();

  function leaseCap(max: number): number {
    return max >= LEASE_MIN_LIMIT ? Math.max(1, Math.floor(max / LEASE_FRACTION)) : 0;
  }

  /** One statement: the waiters' units plus a lease ahead; repeats while requests keep waiting. */
  async function drain(key: string, k: Key) {
    k.busy = true;
    try {
      do {
        const batch = k.waiting.splice(0);
        const ahead = k.leaseSize;
        const asked = batch.length + ahead;
        let granted: { granted: number; windowEnd: Date };
        try {
          granted = (await takeRateLimits(db, [{ key, max: k.max, windowMs: k.windowMs, n: asked }], clock())).get(key)!;
        } catch (error) {
          for (const w of batch) w.reject(error);
          continue;
        }
        const windowEnd = granted.windowEnd.getTime();
        // A new window: whatever was leased in the old one is gone.
        if (windowEnd !== k.windowEnd) {
          k.leased = 0;
          k.full = false;
          k.windowEnd = windowEnd;
        }
        for (const [i, w] of batch.entries()) w.resolve({ ok: i < granted.granted, windowEnd });
        k.leased += Math.max(0, granted.granted - batch.length);
        if (granted.granted < asked) k.full = true;
        // Busy keys lease more next time, up to the cap.
        else if (ahead > 0) k.leaseSize = Math.min(leaseCap(k.max), ahead * 2);
      } while (k.waiting.length > 0);
    } finally {
      k.busy = false;
    }
  }

  return (key, max, windowMs, at) => {
    let k = keys.get(key);
    const now = at ?? clock().getTime();
    if (k && now >= k.windowEnd) {
      // The window ended: the lease and the refusal with it.
      k.leased = 0;
      k.full = false;
    }
    if (!k) {
      k = { max, windowMs, waiting: [], busy: false, leased: 0, leaseSize: leaseCap(max) > 0 ? FIRST_LEASE : 0, windowEnd: 0, full: false };
      keys.set(key, k);
      // Entries of clients long gone would pile up; forgetting them only costs a statement each.
      if (keys.size > 50_000) for (const [other, o] of keys) if (!o.busy && o.waiting.length === 0 && now >= o.windowEnd) keys.delete(other);
    }
    // A rule edited meanwhile: the next statement uses its latest settings (a raised limit may grant again).
    if (max !== k.max) k.full = false;
    k.max = max;
    k.windowMs = windowMs;
    if (k.leaseSize > leaseCap(max)) k.leaseSize = leaseCap(max);
    if (now < k.windowEnd && k.leased > 0) {
      k.leased--;
      // Topped up before it runs out, so the next requests do not wait either.
      if (!k.busy && k.leased < k.leaseSize / 2 && !k.full) void drain(key, k);
      return { ok: true, windowEnd: k.windowEnd };
    }
    if (now < k.windowEnd && k.full) return { ok: false, windowEnd: k.windowEnd };
    const entry = k;
    return new Promise<TakeResult>((resolve, reject) => {
      entry.waiting.push({ resolve, reject });
      if (!entry.busy) void drain(key, entry);
    });
  };
}
