/** Postgres through node-postgres: the self-hosted adapter when DATABASE_URL is set. */
import { drizzle } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import pg from "pg";
import * as schema from "./schema";
import type { Db } from "./types";
import { MIGRATIONS_DIR } from "./migrations-dir";

export interface PostgresDatabase {
  db: Db;
  pool: pg.Pool;
  close(): Promise<void>;
}

// Arbitrary constant: serializes migrations when several processes start at once.
const MIGRATION_LOCK_KEY = 727_001;

export async function openPostgres(url: string, opts: { migrate?: boolean; max?: number } = {}): Promise<PostgresDatabase> {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10 });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => {});
  if (opts.migrate !== false) await migratePostgres(pool);
  const db = drizzle(pool, { schema }) as unknown as Db;
  return { db, pool, close: () => pool.end() };
}

export async function migratePostgres(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_DIR });
  } finally {
    await client.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => {});
    client.release();
  }
}
