/**
 * The edge's route table, cached in the process: hostname → target. Loaded
 * whole at start; a `workspace_edge` notification naming a project reloads that
 * project's hostnames (coalesced: many changes in a burst reload once). Postgres
 * delivers notifications to every adapter process; PGlite to its one process.
 * While the Postgres listener is down, the whole table is reloaded every
 * second instead, so a change still takes effect within about a second.
 */
import type { Db } from "../../../shared/db/types";
import type { Logger } from "../../../shared/http/logger";
import { type EdgeTarget, loadTargets } from "./store";

export const EDGE_CHANNEL = "workspace_edge";
const FALLBACK_RELOAD_MS = 1_000;

export interface RouteTable {
  /** The target of a Host header value (any case, with or without port or trailing dot). */
  lookup(host: string | undefined): EdgeTarget | undefined;
  /** Feed for the channel listener. */
  changed(projectId: string): void;
  setActive(active: boolean): void;
  /** Reloads one project's hostnames now and resolves when done. */
  reload(projectId: string): Promise<void>;
  /**
   * Resolves after a read of the project that began after this call: for a request
   * that found nothing deployed, so a deployment reported ready (committed before the
   * request arrived) is served even before its notification arrives. A read that
   * began earlier, even a moment earlier, may predate the commit and does not count.
   * The project joins the next read, which reads every project waiting together; such
   * reads begin at least `spacingMs` after the last read began: a flood of requests
   * (to one project or to many) costs at most one read per `spacingMs`, and each
   * request waits at most about that long plus the read.
   */
  refresh(projectId: string, spacingMs: number): Promise<void>;
  /** Resolves once every reload asked for so far is done (tests, and callers that just changed something). */
  settled(): Promise<void>;
  /**
   * Up to when the table is known current (GET /readyz's `edge` check): now while the
   * change feed is listening and no reload is failing (changes arrive as they happen);
   * else the end of the last successful reload (the fallback reloads every second).
   */
  lastTickAt(): Date;
  stop(): void;
}

/** `Example.COM:8080` → `example.com`; `[::1]:80` → `[::1]`. */
export function hostnameOf(host: string | undefined): string | undefined {
  if (!host || host.length > 300) return undefined;
  let name = host.toLowerCase();
  if (name.startsWith("[")) {
    const end = name.indexOf("]");
    return end < 0 ? undefined : name.slice(0, end + 1);
  }
  const colon = name.indexOf(":");
  if (colon >= 0) name = name.slice(0, colon);
  if (name.endsWith(".")) name = name.slice(0, -1);
  return name || undefined;
}

export async function createRouteTable(deps: { db: Db; sharedDomain: string; logger: Logger }): Promise<RouteTable> {
  let byHost = new Map<string, EdgeTarget>();
  const hostsOf = new Map<string, Set<string>>();
  const pending = new Set<string>();
  let reloadAll = false;
  let running: Promise<void> = Promise.resolve();
  // The run queued behind `running` that has not begun: what is pending now is read by it.
  let nextRun: Promise<void> | undefined;
  let fallback: ReturnType<typeof setInterval> | undefined;
  // When the last read began (refresh() spaces its reads by it), and the spaced read that refreshes wait on.
  let readBeganAt = -Infinity;
  let spacedRead: Promise<void> | undefined;
  // For lastTickAt(): the feed's state, and whether the last reload failed.
  let feedActive = true;
  let failing = false;
  let lastLoadedAt = new Date();

  /** Replaces the hostnames of `ids` (or of everything) with what was loaded for them; a project not loaded is gone. */
  const replace = (ids: string[] | "all", loaded: Map<string, EdgeTarget>) => {
    const next = ids === "all" ? new Map<string, EdgeTarget>() : new Map(byHost);
    if (ids === "all") hostsOf.clear();
    else
      for (const id of ids) {
        for (const h of hostsOf.get(id) ?? []) next.delete(h);
        hostsOf.delete(id);
      }
    for (const [host, target] of loaded) {
      next.set(host, target);
      const set = hostsOf.get(target.projectId) ?? new Set<string>();
      set.add(host);
      hostsOf.set(target.projectId, set);
    }
    byHost = next;
  };

  const run = async () => {
    nextRun = undefined;
    const whole = reloadAll;
    const ids = [...pending];
    reloadAll = false;
    pending.clear();
    readBeganAt = performance.now();
    try {
      if (whole) replace("all", await loadTargets(deps.db, deps.sharedDomain));
      else if (ids.length > 0) replace(ids, await loadTargets(deps.db, deps.sharedDomain, ids));
      failing = false;
      lastLoadedAt = new Date();
    } catch (error) {
      failing = true;
      deps.logger.error("edge_routes_reload_failed", { error: (error as Error).message });
      // Try again shortly: the table must not stay stale.
      reloadAll = true;
      setTimeout(schedule, 500).unref();
    }
  };

  /** The run that will read what is pending now (it never rejects: a failed read is logged and retried). */
  const schedule = (): Promise<void> => {
    if (!nextRun) {
      nextRun = running.then(run);
      running = nextRun;
    }
    return nextRun;
  };

  replace("all", await loadTargets(deps.db, deps.sharedDomain));

  const settled = async () => {
    // Chained reloads may schedule more; wait until none is scheduled.
    while (true) {
      const at = running;
      await at;
      if (at === running && !nextRun) return;
    }
  };

  const reload = (projectId: string) => {
    pending.add(projectId);
    return schedule();
  };

  return {
    lookup: (host) => {
      const name = hostnameOf(host);
      return name ? byHost.get(name) : undefined;
    },
    changed(projectId) {
      if (projectId) pending.add(projectId);
      else reloadAll = true;
      schedule();
    },
    setActive(active) {
      feedActive = active;
      if (fallback) clearInterval(fallback);
      fallback = undefined;
      reloadAll = true;
      schedule();
      if (!active) {
        fallback = setInterval(() => {
          reloadAll = true;
          schedule();
        }, FALLBACK_RELOAD_MS);
        fallback.unref();
      }
    },
    reload,
    refresh(projectId, spacingMs) {
      // Whichever read begins next (this one's, or a notification's run meanwhile) reads the project.
      pending.add(projectId);
      if (nextRun) return nextRun;
      if (spacedRead) return spacedRead;
      const wait = readBeganAt + spacingMs - performance.now();
      if (wait <= 0) return schedule();
      spacedRead = new Promise((r) => setTimeout(r, wait)).then(() => {
        spacedRead = undefined;
        return schedule();
      });
      return spacedRead;
    },
    settled,
    lastTickAt: () => (feedActive && !failing ? new Date() : lastLoadedAt),
    stop() {
      if (fallback) clearInterval(fallback);
    },
  };
}
