/**
 * A self-hosted instance's backup: one gzipped tar holding
 *   manifest.json        versions, migration level, row counts, and what is NOT included
 *   database/<t>.jsonl   every table (dump.ts), one consistent snapshot
 *   artifacts/uploads/   the stored uploads and deployment artifacts (DATA_DIR/uploads),
 *                        unless they live in S3 (then the bucket is the operator's to back up)
 * Not included, said in the manifest and on the terminal: the secret keys (SECRET_KEYS or
 * DATA_DIR/secret-keys: without them the restored secrets cannot be read, and with them the
 * archive must not travel), the owner-token file, the runner's work directories (builds are
 * rebuilt by redeploying) and the bytes in S3.
 *
 * A restore goes into an empty data directory or database only (a non-empty one is refused,
 * never merged), at the migration level the backup was made at (the same version; upgrade
 * after). The archive is the operator's own file, but is still unpacked as if it were not:
 * regular files and folders only, no links, no path leaving the staging folder.
 */
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, chmodSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import * as tar from "tar";
import { sql } from "drizzle-orm";
import { rowsOf } from "../../../shared/db/rows";
import { LATEST_MIGRATION } from "../../../shared/db/migration-level";
import type { Db } from "../../../shared/db/types";
import pkg from "../../../package.json";
import { dumpDatabase, loadDatabase } from "./dump";

export const BACKUP_FORMAT = "workspace-service-backup/1";

export const NOT_INCLUDED = [
  "the secret keys (SECRET_KEYS, or DATA_DIR/secret-keys): keep them apart from the archive; a restore needs the same keys to read its secrets",
  "DATA_DIR/owner-token (the owner's token itself is in the database, hashed: the token you hold still works)",
  "the runner's work directories (built apps): redeploy after a restore",
  "job_credentials: git credentials forwarded by wsp deploy, held only for a job's lease (a restored instance has no job running)",
] as const;

export interface Manifest {
  format: typeof BACKUP_FORMAT;
  createdAt: string;
  /** package.json's version of the code that made it. */
  version: string;
  /** The last migration applied (drizzle's tag): a restore needs the same. */
  migration: string;
  database: "pglite" | "postgres";
  tables: Record<string, number>;
  artifacts: { included: boolean; files: number; bytes: number; note?: string };
  notIncluded: string[];
}

export class RestoreRefusedError extends Error {}

const codeVersion = () => pkg.version;

/** Files and bytes under `dir` (regular files only). */
function tally(dir: string): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  if (!existsSync(dir)) return { files, bytes };
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    files++;
    bytes += statSync(join(entry.parentPath, entry.name)).size;
  }
  return { files, bytes };
}

export interface BackupSource {
  db: Db;
  database: "pglite" | "postgres";
  /** DATA_DIR/uploads when uploads are on disk; undefined when they are in S3. */
  uploadsDir?: string;
}

/** Writes the archive to `file` (through a temporary file beside it: a failed backup leaves no half archive). */
export async function createBackup(source: BackupSource, file: string, now = new Date()): Promise<Manifest> {
  const staging = mkdtempSync(join(tmpdir(), "wsp-backup-"));
  const partial = `${file}.${process.pid}.partial`;
  try {
    mkdirSync(join(staging, "database"));
    const tables = await dumpDatabase(source.db, join(staging, "database"));
    let artifacts: Manifest["artifacts"];
    if (source.uploadsDir) {
      const target = join(staging, "artifacts", "uploads");
      mkdirSync(target, { recursive: true });
      // Uploads still arriving (`.part`) are not stored yet: not part of the snapshot.
      if (existsSync(source.uploadsDir)) cpSync(source.uploadsDir, target, { recursive: true, filter: (src) => !src.endsWith(".part") });
      artifacts = { included: true, ...tally(target) };
    } else {
      artifacts = { included: false, files: 0, bytes: 0, note: "uploads and artifacts are in S3: back up the bucket with the storage's own tools" };
    }
    const manifest: Manifest = {
      format: BACKUP_FORMAT,
      createdAt: now.toISOString(),
      version: codeVersion(),
      migration: LATEST_MIGRATION.tag,
      database: source.database,
      tables,
      artifacts,
      notIncluded: [...NOT_INCLUDED],
    };
    writeFileSync(join(staging, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    mkdirSync(dirname(resolve(file)), { recursive: true });
    await tar.c({ gzip: true, file: partial, cwd: staging, portable: true, mode: 0o600 } as tar.TarOptionsWithAliasesAsyncFile, [
      "manifest.json",
      "database",
      ...(artifacts.included ? ["artifacts"] : []),
    ]);
    chmodSync(partial, 0o600);
    renameSync(partial, file);
    return manifest;
  } finally {
    rmSync(partial, { force: true });
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Unpacks an archive into a fresh staging folder and reads its manifest. The caller removes the folder. */
export async function openBackup(file: string): Promise<{ dir: string; manifest: Manifest }> {
  if (!existsSync(file)) throw new RestoreRefusedError(`No backup at ${file}`);
  const dir = mkdtempSync(join(tmpdir(), "wsp-restore-"));
  try {
    await tar.x({
      file,
      cwd: dir,
      strict: true,
      preservePaths: false,
      // Regular files and folders only: a link in an archive could point anywhere.
      filter: (_path, entry) => "type" in entry && (entry.type === "File" || entry.type === "Directory"),
    });
    const path = join(dir, "manifest.json");
    if (!existsSync(path)) throw new RestoreRefusedError(`${file} is not a workspace-service backup (no manifest.json)`);
    const manifest = JSON.parse(readFileSync(path, "utf8")) as Manifest;
    if (manifest.format !== BACKUP_FORMAT)
      throw new RestoreRefusedError(`${file}: unknown backup format ${JSON.stringify(manifest.format)} (this version reads ${BACKUP_FORMAT})`);
    return { dir, manifest };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    if (e instanceof RestoreRefusedError) throw e;
    throw new RestoreRefusedError(`${file} cannot be read as a backup: ${(e as Error).message}`);
  }
}

/** Refuses a backup made at another migration level than this code's, before anything is created. */
export function checkLevel(manifest: Manifest): void {
  if (manifest.migration === LATEST_MIGRATION.tag) return;
  throw new RestoreRefusedError(
    `The backup was made at migration ${manifest.migration} (version ${manifest.version}); this version is at ${LATEST_MIGRATION.tag}. ` +
      "Restore it with the version that made it, then start this version on the restored data to upgrade it.",
  );
}

/** An empty database: no table outside the system schemas (not even drizzle's migrations table). */
export async function checkEmptyDatabase(db: Db, where: string): Promise<void> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(sql`SELECT count(*) AS n FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`),
  );
  if (Number(row?.n ?? 0) > 0) throw new RestoreRefusedError(`${where} is not empty: a backup is restored into an empty database only, never merged.`);
}

/** An empty (or missing) folder. */
export function checkEmptyDir(dir: string, what: string): void {
  if (existsSync(dir) && readdirSync(dir).length > 0) {
    throw new RestoreRefusedError(`${what} ${dir} is not empty: a backup is restored into an empty data directory only, never merged.`);
  }
}

/** Loads the unpacked backup's database into `db` (just migrated, empty) and copies its artifacts to `uploadsDir`. */
export async function restoreInto(unpacked: string, manifest: Manifest, target: { db: Db; uploadsDir?: string }): Promise<Record<string, number>> {
  const counts = await loadDatabase(target.db, join(unpacked, "database"), Object.keys(manifest.tables));
  const artifacts = join(unpacked, "artifacts", "uploads");
  if (target.uploadsDir && existsSync(artifacts)) cpSync(artifacts, target.uploadsDir, { recursive: true });
  return counts;
}
