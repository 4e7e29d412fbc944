/**
 * The self-hosted upload sweeper: every few minutes, removes expired sessions
 * and their tarballs, the artifacts failed, canceled and pruned deployments left
 * (functions/deployments/artifacts.ts), and on disk also the files no session
 * owns any more (an upload that finished after its session was swept, a partial
 * file left by a crash).
 */
import { inArray } from "drizzle-orm";
import { uploadSessions } from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";
import type { Logger } from "../../../shared/http/logger";
import type { DiskStorage } from "../../../shared/storage/disk";
import { SESSION_TTL_MS } from "../../../shared/storage/limits";
import type { UploadStorage } from "../../../shared/storage/types";
import { sweepExpiredUploads } from "../../projects/folder/sweep";
import { sweepArtifacts } from "../../deployments/artifacts";
import { describeError } from "../../../shared/http/error-log";

export const SWEEP_INTERVAL_MS = 5 * 60 * 1000;
/** A file no session owns is left alone this long (its session row may be a moment away from being read). */
const ORPHAN_GRACE_MS = 5 * 60 * 1000;

const isDisk = (s: UploadStorage): s is DiskStorage => s.kind === "relay" && "list" in s;

/** Files under the upload directory whose session is gone; partial files older than a session's lifetime. */
export async function sweepDiskOrphans(db: Db, disk: DiskStorage, now: Date, logger: Logger): Promise<number> {
  const files = await disk.list();
  const finished = files.filter((f) => !f.partial && f.key !== null && now.getTime() - f.mtimeMs > ORPHAN_GRACE_MS);
  const owned = new Set<string>();
  for (let i = 0; i < finished.length; i += 500) {
    const keys = finished.slice(i, i + 500).map((f) => f.key!);
    for (const row of await db.select({ key: uploadSessions.objectKey }).from(uploadSessions).where(inArray(uploadSessions.objectKey, keys)))
      owned.add(row.key);
  }
  const stale = files.filter((f) =>
    f.partial || f.key === null ? now.getTime() - f.mtimeMs > SESSION_TTL_MS : now.getTime() - f.mtimeMs > ORPHAN_GRACE_MS && !owned.has(f.key),
  );
  for (const f of stale) await disk.removePath(f.path);
  if (stale.length > 0) logger.info("upload sweep: removed orphaned files", { removed: stale.length });
  return stale.length;
}

export async function sweepUploadsOnce(db: Db, uploads: UploadStorage, now: Date, logger: Logger): Promise<void> {
  await sweepExpiredUploads({ db, uploads, now, logger });
  await sweepArtifacts({ db, uploads, now, logger });
  if (isDisk(uploads)) await sweepDiskOrphans(db, uploads, now, logger);
}

/** Runs the sweep now and then every SWEEP_INTERVAL_MS, one run at a time; stop() waits for a run in progress. */
export function startUploadSweeper(opts: { db: Db; uploads: UploadStorage; logger: Logger; intervalMs?: number }) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const run = () => {
    running = sweepUploadsOnce(opts.db, opts.uploads, new Date(), opts.logger)
      .catch((e) => opts.logger.error("upload sweep failed", describeError(e)))
      .finally(() => {
        running = undefined;
        if (!stopped) timer = setTimeout(run, opts.intervalMs ?? SWEEP_INTERVAL_MS).unref();
      });
  };
  run();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
