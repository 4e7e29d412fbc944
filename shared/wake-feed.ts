/**
 * Wakes waiters in this process at once when something they wait for happened:
 * log streams when a project's lines were stored, runner claims when a
 * deployment was queued. Waiters also poll (after `ms`), which covers what
 * another process or the Worker did: they have no such feed.
 */
export interface WakeFeed {
  /** Something happened for these keys (projects, or a fixed key). */
  notify(keys: string[]): void;
  /** Resolves at the next notify of `key`, or after `ms`, or when `signal` aborts; whichever comes first. */
  wait(key: string, ms: number, signal?: AbortSignal): Promise<void>;
}

export function createWakeFeed(): WakeFeed {
  const waiters = new Map<string, Set<() => void>>();
  return {
    notify(keys) {
      for (const key of keys) {
        const set = waiters.get(key);
        if (!set) continue;
        waiters.delete(key);
        for (const wake of set) wake();
      }
    },
    wait(key, ms, signal) {
      return new Promise<void>((resolve) => {
        const set = waiters.get(key) ?? new Set<() => void>();
        waiters.set(key, set);
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          waiters.get(key)?.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done, { once: true });
        set.add(done);
      });
    },
  };
}

/** The one key of the job feed: any deployment queued for a build server wakes every waiting claim (each then asks the database). */
export const JOBS_QUEUED = "queued";
