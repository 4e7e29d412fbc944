/**
 * Embedded PGlite: the self-hosted default. One connection; every query is serialized.
 *
 * PGlite is Postgres compiled to WASM, and a statement runs synchronously where
 * PGlite lives: on the server's event loop, a 2 s scan froze every request (API,
 * edge, timers) for 2 s. So PGlite lives in a worker thread (pglite-worker.mjs)
 * and this side holds a small client that sends each statement as a message
 * (pglite-client.ts). Drizzle (`drizzle-orm/pglite`) runs here on that client
 * exactly as on PGlite itself: the rows are parsed by PGlite in the worker (the
 * types drizzle asks raw, timestamps and dates, are parsed here by drizzle's own
 * parsers), a transaction holds PGlite's lock in the worker until it ends (other
 * statements wait, never interleaved), LISTEN notifications are forwarded, and
 * errors keep their Postgres fields (`code`, `constraint`, ...).
 *
 * Chosen over `@electric-sql/pglite-socket` (PGlite behind a Postgres socket for
 * the `pg` driver): that server runs PGlite on the loop of whoever hosts it (a
 * worker would be needed all the same), `pg` parses types differently from
 * PGlite (int8, numeric, json), and its sharing of one session between several
 * connections has open deadlock and interleaving bugs (electric-sql/pglite
 * issues 985 and 1046).
 */
import type { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/pglite";
import { migrate } from "drizzle-orm/pglite/migrator";
import * as schema from "./schema";
import type { Db } from "./types";
import { MIGRATIONS_DIR } from "./migrations-dir";
import { openPgliteWorker } from "./pglite-client";
import { ensureTemplate, seedDataDir } from "./pglite-template";
import { appliedBetween, isCurrent, readAppliedTimes, refuseNewerDatabase } from "./migration-level";

export interface PgliteDatabase {
  db: Db;
  /**
   * The worker's client. It has the parts of PGlite's API that drizzle and this
   * code use (query, exec, transaction, listen, dumpDataDir, close) and is typed
   * as PGlite for them; the rest of PGlite's API is not there.
   */
  client: PGlite;
  /** The tags of the migrations this open applied (empty: none were due, or `migrate: false`). */
  migrated: string[];
  close(): Promise<void>;
}

export interface OpenPgliteOptions {
  dataDir?: string;
  loadDataDir?: Blob | File;
  migrate?: boolean;
  /**
   * A missing or empty `dataDir` starts as a copy of the migrated template
   * (pglite-template.ts), made on the first such open, instead of PGlite's initdb.
   */
  template?: boolean;
}

export async function openPglite(opts: OpenPgliteOptions): Promise<PgliteDatabase> {
  const seeded = opts.template && opts.dataDir ? await seedDataDir(opts.dataDir, makeMigrated) : "existing";
  const client = (await openPgliteWorker({ dataDir: opts.dataDir, loadDataDir: opts.loadDataDir })) as unknown as PGlite;
  try {
    const db = drizzle(client, { schema }) as unknown as Db;
    // A copy of the template is this open's migrating: its migrations are reported as applied now.
    const migrated = opts.migrate !== false ? await migratePglite(client, seeded === "template") : [];
    return { db, client, migrated, close: () => client.close() };
  } catch (e) {
    await client.close().catch(() => {});
    throw e;
  }
}

/** Makes the migrated template ahead of any start (pglite-template.ts), unless it exists. */
export const ensurePgliteTemplate = () => ensureTemplate(makeMigrated);

/** Initialises and migrates a new data directory at `dir` (the template), then closes it. */
async function makeMigrated(dir: string): Promise<void> {
  const client = (await openPgliteWorker({ dataDir: dir })) as unknown as PGlite;
  try {
    await migratePglite(client);
  } finally {
    await client.close();
  }
}

/** Applies the code's migrations (one connection: nothing else can migrate meanwhile); refuses a database migrated by a newer version. */
async function migratePglite(client: PGlite, fromTemplate = false): Promise<string[]> {
  const raw = drizzle(client);
  const before = await readAppliedTimes(raw);
  refuseNewerDatabase(before);
  // The usual start: every migration of the code is recorded. drizzle's migrate() would then still read and hash
  // every migration file and apply nothing (it applies only those newer than the newest row), so it is skipped.
  if (isCurrent(before)) return fromTemplate ? appliedBetween([], before) : [];
  await migrate(raw, { migrationsFolder: MIGRATIONS_DIR });
  return appliedBetween(before, await readAppliedTimes(raw));
}
