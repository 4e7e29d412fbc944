/**
 * Apps for the readiness suite on the Node adapter, over databases built to fail
 * a check: one that cannot be reached, and one whose migration record is behind
 * or ahead of the code's. Each is the app with the minimal services a route needs;
 * the readiness answer depends on nothing else.
 */
import { readFileSync } from "node:fs";
import { drizzle } from "drizzle-orm/node-postgres";
import { inject } from "vitest";
import pg from "pg";
import { createApp } from "../../functions/app";
import type { LoopProbe } from "../../functions/operations/readiness";
import { createKeyring } from "../../shared/crypto/keyring";
import type { CodeMigration } from "../../shared/db/migration-level";
import { openPglite } from "../../shared/db/pglite";
import * as schema from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { silentLogger } from "../../shared/http/logger";
import { freshDatabase } from "./fresh-database";
import { buildRequest } from "./harness";
import type { ProbeApp, ProbeDatabase } from "./probe-apps";
import { TEST_SECRET_KEYS } from "./test-keys";

async function appOver(db: Db, close: () => Promise<void>, loops?: LoopProbe[]): Promise<ProbeApp> {
  const keyring = await createKeyring(TEST_SECRET_KEYS);
  const app = createApp({ services: () => ({ db, keyring, config: { mode: "self-hosted", sharedDomain: "apps.test" } }), logger: silentLogger, loops });
  return { request: async (path, init) => app.fetch(buildRequest(path, init)), close };
}

const journalTable = `create schema if not exists drizzle;
  create table if not exists drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)`;

/** The migration record says exactly `recorded` (journal times), nothing else. */
const recordSql = (recorded: CodeMigration[]) =>
  `delete from drizzle.__drizzle_migrations;${recorded.map((m) => `insert into drizzle.__drizzle_migrations (hash, created_at) values ('${m.tag}', ${m.when});`).join("")}`;

export async function openProbeApp(runtime: "node-pglite" | "node-postgres", database: ProbeDatabase, loops?: LoopProbe[]): Promise<ProbeApp> {
  if (runtime === "node-pglite") {
    const opened = await openPglite({ loadDataDir: new Blob([readFileSync(inject("pgliteDump"))]), migrate: false });
    if (database === "unreachable") {
      // The embedded database is gone (closed): every query fails.
      await opened.close();
      return appOver(opened.db, async () => {});
    }
    await opened.client.exec(`${journalTable};${recordSql(database.recorded)}`);
    return appOver(opened.db, () => opened.close(), loops);
  }
  if (database === "unreachable") {
    // A database that does not exist on the server: every connection is refused.
    const url = new URL(inject("pgUrl"));
    url.pathname = "/no_such_database_for_readyz";
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
    pool.on("error", () => {});
    return appOver(drizzle(pool, { schema }) as unknown as Db, () => pool.end());
  }
  const fresh = await freshDatabase(inject("pgUrl"), "ws_readyz");
  const pool = new pg.Pool({ connectionString: fresh.url, max: 2 });
  pool.on("error", () => {});
  await pool.query(`${journalTable};${recordSql(database.recorded)}`);
  return appOver(drizzle(pool, { schema }) as unknown as Db, async () => {
    await pool.end();
    await fresh.drop();
  });
}
