/**
 * Removes expired upload sessions and their tarballs (disk or bucket). Run by
 * the Worker's cron trigger and by a timer on the self-hosted adapter. The object
 * goes first: a session whose object could not be removed stays for the next run.
 */
import type { Db } from "../../../shared/db/types";
import type { Logger } from "../../../shared/http/logger";
import type { UploadStorage } from "../../../shared/storage/types";
import { deleteExpiredSession, expiredSessions } from "./store";
import { describeError } from "../../../shared/http/error-log";

export async function sweepExpiredUploads(opts: { db: Db; uploads: UploadStorage; now: Date; logger: Logger; batch?: number }): Promise<number> {
  const { db, uploads, now, logger } = opts;
  let removed = 0;
  for (const session of await expiredSessions(db, now, opts.batch ?? 200)) {
    try {
      await uploads.remove(session.objectKey);
      await deleteExpiredSession(db, session.id, now);
      removed++;
    } catch (e) {
      logger.error("upload sweep: could not remove an expired upload", { sessionId: session.id, ...describeError(e) });
    }
  }
  if (removed > 0) logger.info("upload sweep", { removed });
  return removed;
}
