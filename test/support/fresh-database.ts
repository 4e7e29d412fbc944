/**
 * A new Postgres database on the server of `serverUrl`, optionally migrated,
 * for tests that need one of their own (start-up, engines, the run's shared one).
 *
 * A migrated one is a copy of the run's template when there is one (the global setup
 * migrates a template once and names it in TEST_PG_TEMPLATE_URL): `create database …
 * template` copies its files in a fraction of the ~2 s that replaying every migration
 * takes, and files that need one run dozens of times per run. Without the template (a
 * script outside vitest, another server), the migrations run as before.
 */
import pg from "pg";
import { migratePostgres } from "../../shared/db/postgres";

export interface FreshDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Set by test/setup/databases.ts for the run: the URL of a database migrated to the code's latest migration. */
export const TEMPLATE_ENV = "TEST_PG_TEMPLATE_URL";

async function onServer(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The template's database name when it lives on the same server, as the same user, as `serverUrl`. */
function templateOn(serverUrl: string): string | undefined {
  const template = process.env[TEMPLATE_ENV];
  if (!template) return undefined;
  const [a, b] = [new URL(serverUrl), new URL(template)];
  if (a.host !== b.host || a.username !== b.username) return undefined;
  return b.pathname.slice(1) || undefined;
}

export async function freshDatabase(serverUrl: string, prefix: string, opts: { migrate?: boolean; template?: boolean } = {}): Promise<FreshDatabase> {
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
  const template = opts.migrate && opts.template !== false ? templateOn(serverUrl) : undefined;
  let migrated = false;
  if (template) {
    try {
      await onServer(serverUrl, `create database ${name} template ${template}`);
      migrated = true;
    } catch {
      // e.g. the template gone or busy: make it the long way.
    }
  }
  if (!migrated) await onServer(serverUrl, `create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  if (opts.migrate && !migrated) {
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
    try {
      await migratePostgres(pool);
    } finally {
      await pool.end();
    }
  }
  return { url: url.toString(), drop: () => onServer(serverUrl, `drop database if exists ${name} with (force)`) };
}
