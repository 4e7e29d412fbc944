/**
 * Scheduled backups of a running self-hosted server (the only way to back up the
 * embedded database without stopping it: one process owns its files).
 *
 * BACKUP_SCHEDULE: how often, as a number and a unit (`30m`, `6h`, `1d`; `s` too, for
 * tests); unset or `off`: none. BACKUP_DIR: where (default DATA_DIR/backups, created
 * 0700). BACKUP_KEEP: how many archives are kept (default 7; the oldest go first).
 * The first backup is taken one period after the start. A backup that fails is
 * logged and the next one is tried on time; the archives are the same as
 * `npm run backup`'s (archive.ts), named `workspace-<UTC time>.tar.gz`.
 */
import { readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "../../../shared/http/logger";
import { ensurePrivateDir } from "../../self-hosted/data-dir";
import { type BackupSource, createBackup } from "./archive";

export interface BackupSchedule {
  everyMs: number;
  dir: string;
  keep: number;
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const NAME = /^workspace-\d{8}T\d{6}Z\.tar\.gz$/;

/** Throws "Invalid configuration BACKUP_…: …" naming the setting. */
export function backupScheduleFromEnv(env: Record<string, string | undefined>, dataDir: string): BackupSchedule | undefined {
  const raw = env.BACKUP_SCHEDULE?.trim();
  if (!raw || raw === "off") return undefined;
  const m = /^(\d{1,6})([smhd])$/.exec(raw);
  const everyMs = m ? Number(m[1]) * UNITS[m[2]!]! : 0;
  if (!m || everyMs < 1_000 || everyMs > 365 * UNITS.d!) {
    throw new Error(`Invalid configuration BACKUP_SCHEDULE: '${raw}' must be off or a period such as 30m, 6h or 1d (1 s to 365 d)`);
  }
  const keepRaw = env.BACKUP_KEEP?.trim() || "7";
  const keep = Number(keepRaw);
  if (!/^\d{1,4}$/.test(keepRaw) || keep < 1 || keep > 1000)
    throw new Error(`Invalid configuration BACKUP_KEEP: '${keepRaw}' must be a whole number from 1 to 1000`);
  return { everyMs, dir: resolve(env.BACKUP_DIR?.trim() || join(dataDir, "backups")), keep };
}

/** `2026-11-28T07:30:05.123Z` → `workspace-20261128T073005Z.tar.gz` (sorts by time). */
export const backupName = (at: Date) => `workspace-${at.toISOString().replace(/[-:]/g, "").slice(0, 15)}Z.tar.gz`;

/** Removes the oldest archives of the schedule beyond `keep` (files it did not name are left alone). */
export function pruneBackups(dir: string, keep: number): string[] {
  const names = readdirSync(dir)
    .filter((n) => NAME.test(n))
    .sort();
  const gone = names.slice(0, Math.max(0, names.length - keep));
  for (const name of gone) rmSync(join(dir, name), { force: true });
  return gone;
}

export function startScheduledBackups(source: BackupSource, schedule: BackupSchedule, logger: Logger, clock: () => Date = () => new Date()) {
  ensurePrivateDir(schedule.dir);
  let running: Promise<void> | undefined;
  const once = async () => {
    const at = clock();
    const file = join(schedule.dir, backupName(at));
    try {
      const manifest = await createBackup(source, file, at);
      const removed = pruneBackups(schedule.dir, schedule.keep);
      logger.info("backup_written", { file, migration: manifest.migration, files: manifest.artifacts.files, removed: removed.length });
    } catch (error) {
      logger.error("backup_failed", { file, error: (error as Error).message });
    }
  };
  const timer = setInterval(() => {
    // One at a time: a backup slower than the period skips a turn rather than piling up.
    running ??= once().finally(() => {
      running = undefined;
    });
  }, schedule.everyMs);
  timer.unref();
  return {
    /** Stops the schedule; resolves once a backup in progress is written (the database must stay open until then). */
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
