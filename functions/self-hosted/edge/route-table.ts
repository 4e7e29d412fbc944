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
   * Reloads one project unless it was loaded within the last `maxAgeMs`: for a
   * request that found nothing deployed, so a deployment reported ready is served
   * even before its notification arrived, while a flood of such requests costs at
   * most one read per project per `maxAgeMs`.
   */
  refresh(projectId: string, maxAgeMs: number): Promise<void>;
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
  let scheduled = false;
  let fallback: ReturnType<typeof setInterval> | undefined;
  // When each project (or, under "all", everything) was last read: refresh() skips fresh ones.
  const loadedAt = new Map<string, number>();
  let allLoadedAt = 0;
  // For lastTickAt(): the feed's state, and whether the last reload failed.
  let feedActive = true;
  let failing = false;
  let lastLoadedAt = new Date();

  /** Replaces the hostnames of `ids` (or of everything) with what was loaded for them; a project not loaded is gone. */
  const replace = (ids: string[] | "all", loaded: Map<string, EdgeTarget>) => {
    const next = ids === "all" ? new Map<string, EdgeTarget>() : new Map(byHost);
    const now = performance.now();
    if (ids === "all") {
      hostsOf.clear();
      loadedAt.clear();
      allLoadedAt = now;
    } else
      for (const id of ids) {
        loadedAt.set(id, now);
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
    scheduled = false;
    const whole = reloadAll;
    const ids = [...pending];
    reloadAll = false;
    pending.clear();
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

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    running = running.then(run);
  };

  replace("all", await loadTargets(deps.db, deps.sharedDomain));

  const settled = async () => {
    // Chained reloads may schedule more; wait until none is scheduled.
    while (true) {
      const at = running;
      await at;
      if (at === running && !scheduled) return;
    }
  };

  const reload = async (projectId: string) => {
    pending.add(projectId);
    schedule();
    await settled();
  };
  const refreshing = new Map<string, Promise<void>>();

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
    refresh(projectId, maxAgeMs) {
      // Requests arriving during the read wait on it instead of asking again.
      const inFlight = refreshing.get(projectId);
      if (inFlight) return inFlight;
      const at = Math.max(loadedAt.get(projectId) ?? 0, allLoadedAt);
      if (performance.now() - at < maxAgeMs) return Promise.resolve();
      const read = reload(projectId).finally(() => refreshing.delete(projectId));
      refreshing.set(projectId, read);
      return read;
    },
    settled,
    lastTickAt: () => (feedActive && !failing ? new Date() : lastLoadedAt),
    stop() {
      if (fallback) clearInterval(fallback);
    },
  };
}
