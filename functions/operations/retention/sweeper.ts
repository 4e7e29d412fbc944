/**
 * The self-hosted adapter's retention timer: one sweep at start and then every
 * RETENTION_SWEEP_INTERVAL_MS (10 minutes), one run at a time. Several processes
 * on one Postgres may each sweep: every statement picks its own rows and a row
 * deleted twice is simply not found. The Worker sweeps from its cron trigger
 * instead (functions/worker.ts).
 */
import type { Db } from "../../../shared/db/types";
import { describeError } from "../../../shared/http/error-log";
import type { Logger } from "../../../shared/http/logger";
import { DEFAULT_RETENTION, type RetentionSettings } from "./settings";
import { sweepRetention } from "./sweep";

export const RETENTION_SWEEP_INTERVAL_MS = 10 * 60 * 1000;

/** One sweep; logs what it removed (counts only) and any kind that failed. */
export async function sweepRetentionOnce(db: Db, settings: RetentionSettings, now: Date, logger: Logger): Promise<void> {
  const { removed, failed } = await sweepRetention(db, settings, now);
  const some = Object.fromEntries(Object.entries(removed).filter(([, n]) => n > 0));
  if (Object.keys(some).length > 0) logger.info("retention sweep: removed rows", some);
  for (const [kind, error] of Object.entries(failed)) logger.error("retention sweep failed", { kind, error });
}

/** Starts the loop; stop() ends it and waits for a run in progress. */
export function startRetentionSweeper(opts: { db: Db; logger: Logger; settings?: RetentionSettings; intervalMs?: number }) {
  const settings = opts.settings ?? DEFAULT_RETENTION;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const run = () => {
    running = sweepRetentionOnce(opts.db, settings, new Date(), opts.logger)
      .catch((e) => opts.logger.error("retention sweep failed", describeError(e)))
      .finally(() => {
        running = undefined;
        if (!stopped) timer = setTimeout(run, opts.intervalMs ?? RETENTION_SWEEP_INTERVAL_MS).unref();
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
