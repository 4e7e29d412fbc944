/**
 * `npm run backup -- <file>` and `npm run restore -- <file>`: a self-hosted
 * instance's backup (archive.ts), with the server's own configuration (DATA_DIR,
 * DATABASE_URL, S3_*; the same environment `npm start` reads). `<file>` is
 * resolved from where the command was run (INIT_CWD under npm).
 *
 * Backup: on Postgres while the server runs (one consistent snapshot); on the
 * embedded database the server must be stopped (one process owns its files): a
 * running server backs itself up on a schedule instead (BACKUP_SCHEDULE).
 * Restore: into an empty data directory or database only.
 * Exit codes: 0 done, 1 refused or failed (the reason on stderr), 2 usage.
 */
import { join, resolve } from "node:path";
import { rmSync } from "node:fs";
import { openPglite } from "../../../shared/db/pglite";
import { openPostgres } from "../../../shared/db/postgres";
import { loadNodeConfig } from "../../self-hosted/config";
import { ensurePrivateDir, lockDataDir, makeTreePrivate } from "../../self-hosted/data-dir";
import { checkEmptyDatabase, checkEmptyDir, checkLevel, createBackup, NOT_INCLUDED, openBackup, RestoreRefusedError, restoreInto } from "./archive";

const USAGE = "Usage: npm run backup -- <file.tar.gz>\n       npm run restore -- <file.tar.gz>\n";

async function backup(file: string, env: NodeJS.ProcessEnv): Promise<void> {
  const config = loadNodeConfig(env);
  const unlock = config.databaseUrl ? () => {} : lockDataDir(config.dataDir);
  try {
    const database = config.databaseUrl ? await openPostgres(config.databaseUrl, { max: 2 }) : await openPglite({ dataDir: join(config.dataDir, "pglite") });
    try {
      const manifest = await createBackup(
        { db: database.db, database: config.databaseUrl ? "postgres" : "pglite", uploadsDir: config.s3 ? undefined : join(config.dataDir, "uploads") },
        file,
      );
      const rows = Object.values(manifest.tables).reduce((a, n) => a + n, 0);
      console.log(
        `Backed up ${rows} rows of ${Object.keys(manifest.tables).length} tables (migration ${manifest.migration}) and ${manifest.artifacts.files} stored files to ${file}`,
      );
      if (manifest.artifacts.note) console.log(`Not included: ${manifest.artifacts.note}`);
      for (const item of NOT_INCLUDED) console.log(`NOT INCLUDED: ${item}`);
    } finally {
      await database.close();
    }
  } finally {
    unlock();
  }
}

async function restore(file: string, env: NodeJS.ProcessEnv): Promise<void> {
  const config = loadNodeConfig(env);
  const { dir, manifest } = await openBackup(file);
  try {
    checkLevel(manifest);
    const uploadsDir = config.s3 ? undefined : join(config.dataDir, "uploads");
    let unlock = () => {};
    if (!config.databaseUrl) {
      checkEmptyDir(join(config.dataDir, "pglite"), "The embedded database folder");
      unlock = lockDataDir(config.dataDir);
    }
    try {
      if (uploadsDir) checkEmptyDir(uploadsDir, "The uploads folder");
      if (config.databaseUrl) {
        const probe = await openPostgres(config.databaseUrl, { migrate: false, max: 1 });
        try {
          await checkEmptyDatabase(probe.db, "The database of DATABASE_URL");
        } finally {
          await probe.close();
        }
      }
      const pgliteDir = join(config.dataDir, "pglite");
      if (!config.databaseUrl) ensurePrivateDir(pgliteDir);
      const database = config.databaseUrl ? await openPostgres(config.databaseUrl, { max: 2 }) : await openPglite({ dataDir: pgliteDir });
      try {
        if (uploadsDir) ensurePrivateDir(uploadsDir);
        const counts = await restoreInto(dir, manifest, { db: database.db, uploadsDir });
        const rows = Object.values(counts).reduce((a, n) => a + n, 0);
        console.log(
          `Restored ${rows} rows of ${Object.keys(counts).length} tables and ${manifest.artifacts.files} stored files from ${file} (made ${manifest.createdAt})`,
        );
      } finally {
        await database.close();
        if (!config.databaseUrl) makeTreePrivate(pgliteDir);
        if (uploadsDir) makeTreePrivate(uploadsDir);
      }
      console.log("Start the server with the SECRET_KEYS the backup was made with: other keys are refused at start (the secrets could not be read).");
      for (const item of manifest.notIncluded) console.log(`NOT INCLUDED: ${item}`);
    } finally {
      unlock();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const [command, target, ...rest] = process.argv.slice(2);
if ((command !== "backup" && command !== "restore") || !target || rest.length > 0) {
  process.stderr.write(USAGE);
  process.exit(2);
}
const file = resolve(process.env.INIT_CWD ?? process.cwd(), target);
try {
  await (command === "backup" ? backup(file, process.env) : restore(file, process.env));
} catch (e) {
  const known = e instanceof RestoreRefusedError || (e instanceof Error && /^(Invalid configuration|Data directory)/.test(e.message));
  process.stderr.write(`${command === "backup" ? "Backup" : "Restore"} failed: ${known ? (e as Error).message : ((e as Error).stack ?? String(e))}\n`);
  process.exit(1);
}
