/**
 * The database part of a backup, as JSON lines: one file per table, one row per
 * line, each row as Postgres itself writes it (`row_to_json`) and read back by
 * Postgres itself (`json_populate_recordset`), so timestamps, arrays, jsonb and
 * bigints round-trip exactly, on PGlite and Postgres alike and from one to the
 * other. Secrets stay as they are stored: encrypted.
 *
 * The dump reads every table in one REPEATABLE READ, READ ONLY transaction (one
 * snapshot: consistent while the server keeps writing), through a cursor, a batch
 * at a time, so a table of millions of log lines is never held in memory.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { sql } from "drizzle-orm";
import { rowsOf } from "../../../shared/db/rows";
import type { Db, Tx } from "../../../shared/db/types";
import { backupTables, EXCLUDED_TABLES } from "./tables";

const FETCH_ROWS = 2_000;
/** A restore inserts up to this many rows, or this many bytes of JSON, per statement. */
const LOAD_ROWS = 2_000;
const LOAD_BYTES = 8 * 1024 * 1024;

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Writes `<dir>/<table>.jsonl` for every table; the row count of each. */
export async function dumpDatabase(db: Db, dir: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  await db.transaction(
    async (tx) => {
      for (const table of backupTables()) {
        const out = createWriteStream(join(dir, `${table}.jsonl`), { mode: 0o600 });
        let rows = 0;
        await tx.execute(sql.raw(`DECLARE backup_rows NO SCROLL CURSOR FOR SELECT row_to_json(t)::text AS j FROM ${quoted(table)} t`));
        for (;;) {
          const batch = rowsOf<{ j: string }>(await tx.execute(sql.raw(`FETCH ${FETCH_ROWS} FROM backup_rows`)));
          for (const { j } of batch) if (!out.write(`${j}\n`)) await once(out, "drain");
          rows += batch.length;
          if (batch.length < FETCH_ROWS) break;
        }
        await tx.execute(sql.raw("CLOSE backup_rows"));
        out.end();
        await once(out, "close");
        counts[table] = rows;
      }
    },
    { isolationLevel: "repeatable read", accessMode: "read only" },
  );
  return counts;
}

/** Inserts the rows of one table's JSON lines, in statements of bounded size. */
async function loadTable(tx: Tx, table: string, file: string): Promise<number> {
  const lines = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Number.POSITIVE_INFINITY });
  let batch: string[] = [];
  let bytes = 0;
  let rows = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const json = `[${batch.join(",")}]`;
    await tx.execute(sql`INSERT INTO ${sql.raw(quoted(table))} SELECT * FROM json_populate_recordset(NULL::${sql.raw(quoted(table))}, ${json}::json)`);
    rows += batch.length;
    batch = [];
    bytes = 0;
  };
  for await (const line of lines) {
    if (line.length === 0) continue;
    batch.push(line);
    bytes += line.length;
    if (batch.length >= LOAD_ROWS || bytes >= LOAD_BYTES) await flush();
  }
  await flush();
  return rows;
}

/**
 * Loads a dump into a database just migrated to the dump's level, in one
 * transaction (a failed restore leaves nothing half-loaded). Triggers (the edge's
 * and the auth cache's notifications) and foreign-key checks are switched off for
 * the load where the role may (`session_replication_role`, a superuser's, as on
 * PGlite and a self-hosted Postgres); elsewhere the parents-first order keeps the
 * constraints satisfied. Rows a migration created are replaced by the dump's.
 */
export async function loadDatabase(db: Db, dir: string, tables: string[]): Promise<Record<string, number>> {
  const known = new Set(backupTables());
  // An archive made before job_credentials was left out may list it: its rows are not loaded (they were only ever a job's).
  const unknown = tables.filter((t) => !known.has(t) && !EXCLUDED_TABLES.has(t));
  if (unknown.length > 0) throw new Error(`the backup holds tables this version does not know: ${unknown.join(", ")}`);
  const counts: Record<string, number> = {};
  await db.transaction(async (tx) => {
    await tx.execute(sql.raw("SAVEPOINT replication_role"));
    try {
      await tx.execute(sql.raw("SET LOCAL session_replication_role = replica"));
      await tx.execute(sql.raw("RELEASE SAVEPOINT replication_role"));
    } catch {
      await tx.execute(sql.raw("ROLLBACK TO SAVEPOINT replication_role"));
    }
    const ordered = backupTables().filter((t) => tables.includes(t));
    await tx.execute(sql.raw(`TRUNCATE ${ordered.map(quoted).join(", ")} CASCADE`));
    for (const table of ordered) counts[table] = await loadTable(tx, table, join(dir, `${table}.jsonl`));
  });
  return counts;
}
