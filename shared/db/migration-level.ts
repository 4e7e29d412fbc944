/**
 * The migration level: which of the code's migrations (migrations/meta/_journal.json)
 * a database has applied, read from drizzle's own record (`drizzle.__drizzle_migrations`).
 * Drizzle keys a migration by its journal time (`created_at` = the entry's `when`) and
 * applies those newer than the newest row, so that time is what identifies one here too
 * (not the SQL's hash: a comment added to an applied file changes the hash, not the schema).
 *
 * Runs on every driver, the Worker included (the journal is bundled; no file is read).
 */
import { sql } from "drizzle-orm";
import journal from "../../migrations/meta/_journal.json";
import type { Db } from "./types";

export interface CodeMigration {
  /** `0026_placement`. */
  tag: string;
  /** The journal time drizzle records as `created_at`. */
  when: number;
}

export const CODE_MIGRATIONS: readonly CodeMigration[] = journal.entries.map((e) => ({ tag: e.tag, when: e.when }));
export const LATEST_MIGRATION: CodeMigration = CODE_MIGRATIONS[CODE_MIGRATIONS.length - 1]!;

/** `0026` of `0026_placement`. */
export const levelOf = (tag: string) => tag.slice(0, 4);
const pad = (n: number) => String(n).padStart(4, "0");

/** What a database recorded: how many migrations, and the newest one's journal time (null: none). */
export interface AppliedMigrations {
  count: number;
  newest: number | null;
}

export type MigrationState =
  | { state: "current"; level: string }
  | { state: "behind"; level: string | null }
  | { state: "ahead"; level: string; unknown: number };

/** Where `applied` stands against the code's migrations. */
export function compareLevel(applied: AppliedMigrations, code: readonly CodeMigration[] = CODE_MIGRATIONS): MigrationState {
  const latest = code[code.length - 1]!;
  if (applied.newest === null) return { state: "behind", level: null };
  const known = code.find((m) => m.when === applied.newest);
  if (known) return known === latest ? { state: "current", level: levelOf(known.tag) } : { state: "behind", level: levelOf(known.tag) };
  if (applied.newest > latest.when) return { state: "ahead", level: pad(Math.max(applied.count - 1, code.length)), unknown: 1 };
  // A time the code never had, older than its latest: written by another branch of the code.
  return { state: "ahead", level: `unknown (recorded ${new Date(applied.newest).toISOString()})`, unknown: 1 };
}

/** The readiness answer for `migrations`: "ok", `behind: 0025 < 0027`, or `ahead: 0028 > 0027`. */
export function describeState(s: MigrationState): string {
  const code = levelOf(LATEST_MIGRATION.tag);
  if (s.state === "current") return "ok";
  if (s.state === "behind") return `behind: ${s.level ?? "none"} < ${code}`;
  return `ahead: ${s.level} > ${code}`;
}

const errorCode = (e: unknown): string | undefined => {
  const err = e as { code?: string; cause?: { code?: string } };
  return err?.code ?? err?.cause?.code;
};

function rowsOf<T>(result: unknown): T[] {
  return ((result as { rows?: T[] }).rows ?? (result as T[])) as T[];
}

/**
 * One query: how many migrations the database recorded and the newest one's time. A
 * database never migrated (no drizzle schema or table) has none; any other failure
 * (unreachable, timeout) is thrown.
 */
export async function readApplied(db: Pick<Db, "execute">): Promise<AppliedMigrations> {
  try {
    const result = await db.execute(sql`select count(*)::int as count, max(created_at)::text as newest from drizzle.__drizzle_migrations`);
    const row = rowsOf<{ count: number | string; newest: string | null }>(result)[0];
    return { count: Number(row?.count ?? 0), newest: row?.newest == null ? null : Number(row.newest) };
  } catch (e) {
    // 42P01: no such table; 3F000: no such schema.
    if (errorCode(e) === "42P01" || errorCode(e) === "3F000") return { count: 0, newest: null };
    throw e;
  }
}

/** Every recorded migration time (start-up only: the refusal of a newer database lists what it does not know). */
export async function readAppliedTimes(db: Pick<Db, "execute">): Promise<number[]> {
  const present = rowsOf<{ present: boolean }>(await db.execute(sql`select to_regclass('drizzle.__drizzle_migrations') is not null as present`))[0];
  if (!present?.present) return [];
  return rowsOf<{ at: string }>(await db.execute(sql`select created_at::text as at from drizzle.__drizzle_migrations order by created_at`)).map((r) =>
    Number(r.at),
  );
}

/** Thrown at start-up when the database was migrated by a newer version of the code. */
export class DatabaseNewerThanCode extends Error {}

/**
 * Refuses a database that recorded a migration this code does not know: it was
 * migrated by a newer version (or another branch), whose schema this code may
 * misread or damage. Names both levels and what to do.
 */
export function refuseNewerDatabase(times: number[], code: readonly CodeMigration[] = CODE_MIGRATIONS): void {
  const known = new Set(code.map((m) => m.when));
  const unknown = times.filter((t) => !known.has(t));
  if (unknown.length === 0) return;
  const latest = code[code.length - 1]!;
  const state = compareLevel({ count: times.length, newest: Math.max(...times) }, code);
  const dbLevel = state.state === "ahead" ? state.level : pad(times.length - 1);
  throw new DatabaseNewerThanCode(
    `The database was migrated by a newer version of workspace-service: it is at migration ${dbLevel} (${unknown.length} migration${unknown.length === 1 ? "" : "s"} this code does not know), this code's latest is ${latest.tag}. Refusing to start: run the newer version, or restore a backup taken before the upgrade.`,
  );
}

/** Whether the recorded times hold every migration of the code (start-up: nothing to apply, no migration file to read). */
export function isCurrent(times: number[], code: readonly CodeMigration[] = CODE_MIGRATIONS): boolean {
  const had = new Set(times);
  return code.every((m) => had.has(m.when));
}

/** Tags of the code's migrations that `before` did not have and `after` has: what a start applied. */
export function appliedBetween(before: number[], after: number[], code: readonly CodeMigration[] = CODE_MIGRATIONS): string[] {
  const had = new Set(before);
  const now = new Set(after);
  return code.filter((m) => !had.has(m.when) && now.has(m.when)).map((m) => m.tag);
}

/** The one line a start (and `npm run db:setup`) prints about the schema: what it applied, or that the database was current. */
export function migrationsLine(applied: string[]): string {
  if (applied.length === 0) return `Migrations: none to apply (database at ${LATEST_MIGRATION.tag})`;
  return `Migrations: applied ${applied.length} (${applied.join(", ")}); database at ${LATEST_MIGRATION.tag}`;
}
