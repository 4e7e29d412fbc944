/** Postgres through node-postgres: the self-hosted adapter when DATABASE_URL is set. */
import { drizzle } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import pg from "pg";
import * as schema from "./schema";
import type { Db } from "./types";
import { MIGRATIONS_DIR } from "./migrations-dir";
import { appliedBetween, isCurrent, readAppliedTimes, refuseNewerDatabase } from "./migration-level";

export interface PostgresDatabase {
  db: Db;
  pool: pg.Pool;
  /** The tags of the migrations this open applied (empty: none were due, another process applied them, or `migrate: false`). */
  migrated: string[];
  close(): Promise<void>;
}

// Arbitrary constant: serializes migrations when several processes start at once.
const MIGRATION_LOCK_KEY = 727_001;

export async function openPostgres(url: string, opts: { migrate?: boolean; max?: number } = {}): Promise<PostgresDatabase> {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10 });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => {});
  let migrated: string[] = [];
  try {
    if (opts.migrate !== false) migrated = await migratePostgres(pool);
  } catch (e) {
    await pool.end().catch(() => {});
    throw e;
  }
  const db = drizzle(pool, { schema }) as unknown as Db;
  return { db, pool, migrated, close: () => pool.end() };
}

/**
 * Applies the code's migrations under a session advisory lock: processes starting at
 * once wait for each other, and each after the first finds nothing left to apply.
 * Refuses (before changing anything) a database migrated by a newer version.
 * Returns the tags this call applied.
 */
export async function migratePostgres(pool: pg.Pool): Promise<string[]> {
  const client = await pool.connect();
  try {
    await client.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    const raw = drizzle(client);
    const before = await readAppliedTimes(raw);
    refuseNewerDatabase(before);
    // Every migration recorded (the usual start): drizzle would read and hash every file to apply nothing.
    if (isCurrent(before)) return [];
    await migrate(raw, { migrationsFolder: MIGRATIONS_DIR });
    return appliedBetween(before, await readAppliedTimes(raw));
  } finally {
    await client.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => {});
    client.release();
  }
}
