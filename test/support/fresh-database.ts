/**
 * A new Postgres database on the server of `serverUrl`, optionally migrated,
 * for tests that need one of their own (start-up, engines, the run's shared one).
 */
import pg from "pg";
import { migratePostgres } from "../../shared/db/postgres";

export interface FreshDatabase {
  url: string;
  drop(): Promise<void>;
}

async function onServer(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export async function freshDatabase(serverUrl: string, prefix: string, opts: { migrate?: boolean } = {}): Promise<FreshDatabase> {
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
  await onServer(serverUrl, `create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  if (opts.migrate) {
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
    try {
      await migratePostgres(pool);
    } finally {
      await pool.end();
    }
  }
  return { url: url.toString(), drop: () => onServer(serverUrl, `drop database if exists ${name} with (force)`) };
}
