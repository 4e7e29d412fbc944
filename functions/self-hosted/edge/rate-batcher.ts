/**
 * Coalesces the edge's rate-limit takes. Every request a rate-limit rule matches
 * needs one unit of its counter row; one statement per request would queue all
 * concurrent requests of a busy client on that row's lock, one commit each. Here
 * at most one statement per counter key is in flight per process: requests that
 * arrive meanwhile wait and the next statement takes as many units as there are
 * waiters (`n`), granting them in arrival order. The count stays exact across
 * processes (each statement grants atomically up to the limit); a process only
 * trades a little latency for far fewer commits under load.
 */
import type { Db } from "../../../shared/db/types";
import { takeRateLimits } from "../../notifications/rate-limit";

export interface TakeResult {
  ok: boolean;
  windowEnd: Date;
}

interface Waiter {
  resolve(r: TakeResult): void;
  reject(e: unknown): void;
}

interface Queue {
  max: number;
  windowMs: number;
  waiting: Waiter[];
}

export type TakeOne = (key: string, max: number, windowMs: number) => Promise<TakeResult>;

export function createRateBatcher(db: Db, clock: () => Date): TakeOne {
  const queues = new Map<string, Queue>();

  async function drain(key: string, q: Queue) {
    while (q.waiting.length > 0) {
      const batch = q.waiting.splice(0);
      try {
        const g = (await takeRateLimits(db, [{ key, max: q.max, windowMs: q.windowMs, n: batch.length }], clock())).get(key)!;
        for (const [i, w] of batch.entries()) w.resolve({ ok: i < g.granted, windowEnd: g.windowEnd });
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    }
    queues.delete(key);
  }

  return (key, max, windowMs) =>
    new Promise<TakeResult>((resolve, reject) => {
      const running = queues.get(key);
      if (running) {
        // A rule edited meanwhile: the next statement uses its latest settings.
        running.max = max;
        running.windowMs = windowMs;
        running.waiting.push({ resolve, reject });
        return;
      }
      const q: Queue = { max, windowMs, waiting: [{ resolve, reject }] };
      queues.set(key, q);
      void drain(key, q);
    });
}
