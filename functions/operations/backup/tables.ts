/**
 * The tables a backup holds: every table of the schema (shared/db/schema), parents
 * before children (foreign keys), so a restore that cannot switch off constraint
 * checks still inserts in an order that satisfies them. drizzle's migrations table
 * is not among them: a restore migrates the empty database itself, to the level
 * the backup was made at.
 */
import { is } from "drizzle-orm";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import * as schema from "../../../shared/db/schema";

/**
 * Tables never backed up: `job_credentials` holds a user's forwarded git credential for the
 * length of one job's lease only (functions/servers/job-credentials.ts); an archive outlives that.
 */
export const EXCLUDED_TABLES: ReadonlySet<string> = new Set(["job_credentials"]);

/** Table names, parents first (a table referencing itself is not its own parent). */
export function backupTables(): string[] {
  const tables = (Object.values(schema) as unknown[]).filter((v): v is PgTable => is(v, PgTable) && !EXCLUDED_TABLES.has(getTableConfig(v).name));
  const parents = new Map<string, Set<string>>();
  for (const t of tables) {
    const config = getTableConfig(t);
    const refs = new Set(config.foreignKeys.map((fk) => getTableConfig(fk.reference().foreignTable).name));
    refs.delete(config.name);
    parents.set(config.name, refs);
  }
  const ordered: string[] = [];
  const placed = new Set<string>();
  // Kahn's algorithm over names sorted for a stable order; a cycle (none today) would be appended as is.
  const pending = [...parents.keys()].sort();
  while (pending.length > 0) {
    const ready = pending.filter((name) => [...parents.get(name)!].every((p) => placed.has(p) || !parents.has(p)));
    const next = ready.length > 0 ? ready : [pending[0]!];
    for (const name of next) {
      ordered.push(name);
      placed.add(name);
      pending.splice(pending.indexOf(name), 1);
    }
  }
  return ordered;
}
