/**
 * Wakes log streams when lines were stored. In one process (PGlite, or one
 * adapter on Postgres) the writer's `notify` wakes waiting streams at once;
 * streams also poll (see sse.ts), which covers lines written by another process
 * and the Worker, where no writer runs.
 */
export interface LogFeed {
  /** Lines of these projects were stored. */
  notify(projectIds: string[]): void;
  /** Resolves at the next notify for `projectId`, or after `ms`, or when `signal` aborts; whichever comes first. */
  wait(projectId: string, ms: number, signal?: AbortSignal): Promise<void>;
}

export function createLogFeed(): LogFeed {
  const waiters = new Map<string, Set<() => void>>();
  return {
    notify(projectIds) {
      for (const id of projectIds) {
        const set = waiters.get(id);
        if (!set) continue;
        waiters.delete(id);
        for (const wake of set) wake();
      }
    },
    wait(projectId, ms, signal) {
      return new Promise<void>((resolve) => {
        const set = waiters.get(projectId) ?? new Set<() => void>();
        waiters.set(projectId, set);
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          waiters.get(projectId)?.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done, { once: true });
        set.add(done);
      });
    },
  };
}
