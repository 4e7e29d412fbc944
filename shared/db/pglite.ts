/** Embedded PGlite: the self-hosted default. One connection; every query is serialized. */
import { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/pglite";
import { migrate } from "drizzle-orm/pglite/migrator";
import * as schema from "./schema";
import type { Db } from "./types";
import { MIGRATIONS_DIR } from "./migrations-dir";

export interface PgliteDatabase {
  db: Db;
  client: PGlite;
  close(): Promise<void>;
}

export async function openPglite(opts: { dataDir?: string; loadDataDir?: Blob | File; migrate?: boolean }): Promise<PgliteDatabase> {
  const client = new PGlite({ dataDir: opts.dataDir, loadDataDir: opts.loadDataDir });
  await client.waitReady;
  const db = drizzle(client, { schema }) as unknown as Db;
  if (opts.migrate !== false) await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_DIR });
  return { db, client, close: () => client.close() };
}
