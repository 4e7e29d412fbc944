/**
 * The checks behind GET /readyz. Cheap enough for a load balancer polling every
 * second: at most one query per call (`select 1`, or the migration record when
 * its cached reading is older than MIGRATIONS_CACHE_MS, which proves the database
 * answers just as well), bounded by a deadline; the loops are read from memory.
 *
 * The answer names each check and never carries an error message, a host name, a
 * version of a dependency or anything from configuration: only states and levels.
 */
import { sql } from "drizzle-orm";
import { compareLevel, describeState, readApplied } from "../../shared/db/migration-level";
import type { Db } from "../../shared/db/types";
import { DeadlineExceeded, withDeadline } from "../../shared/deadline";

/** How long the database has to answer before it counts as down. */
export const DATABASE_DEADLINE_MS = 2_000;
/** How long a reading of the migration level is reused (it changes only when a newer version migrates). */
export const MIGRATIONS_CACHE_MS = 5_000;

/** A background loop of this process (the runner's poll, the edge's route-table feed): when it last completed a pass. */
export interface LoopProbe {
  /** The check's name in the answer (`runner`, `edge`). */
  name: string;
  /** The end of its last successful pass; undefined: none yet. */
  lastTickAt(): Date | undefined;
  /** Without a pass for longer than this, the loop counts as stalled. */
  stalledAfterMs: number;
}

export interface Readiness {
  ready: boolean;
  checks: Record<string, string>;
}

/** One per app (per process on Node, per isolate on the Worker): holds the cached migration reading. */
export function createReadiness(opts: { loops?: LoopProbe[]; deadlineMs?: number; cacheMs?: number } = {}) {
  const deadlineMs = opts.deadlineMs ?? DATABASE_DEADLINE_MS;
  const cacheMs = opts.cacheMs ?? MIGRATIONS_CACHE_MS;
  let cached: { at: number; text: string } | undefined;

  async function database(db: Db, now: number): Promise<{ database: string; migrations?: string }> {
    try {
      if (cached && now - cached.at < cacheMs) {
        await withDeadline(db.execute(sql`select 1`), deadlineMs);
        return { database: "ok", migrations: cached.text };
      }
      const applied = await withDeadline(readApplied(db), deadlineMs);
      cached = { at: now, text: describeState(compareLevel(applied)) };
      return { database: "ok", migrations: cached.text };
    } catch (e) {
      return { database: e instanceof DeadlineExceeded ? `timeout: no answer within ${deadlineMs / 1000} s` : "unreachable" };
    }
  }

  return async function check(db: Db, now: Date): Promise<Readiness> {
    const checks: Record<string, string> = {};
    const { database: state, migrations } = await database(db, now.getTime());
    checks.database = state;
    // Unknown while the database does not answer.
    checks.migrations = migrations ?? "unknown";
    for (const loop of opts.loops ?? []) {
      const at = loop.lastTickAt();
      const age = at ? now.getTime() - at.getTime() : undefined;
      if (age === undefined) checks[loop.name] = "starting: no pass yet";
      else checks[loop.name] = age > loop.stalledAfterMs ? `stalled ${Math.round(age / 1000)} s` : "ok";
    }
    return { ready: Object.values(checks).every((v) => v === "ok"), checks };
  };
}
