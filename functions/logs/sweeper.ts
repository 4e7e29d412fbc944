/**
 * The log retention loop of the self-hosted adapter: sweeps now and then every
 * LOG_SWEEP_INTERVAL_MS (10 minutes), one run at a time. The Worker sweeps in its
 * cron handler instead (functions/worker.ts).
 */
import type { Db } from "../../shared/db/types";
import { describeError } from "../../shared/http/error-log";
import type { Logger } from "../../shared/http/logger";
import { DEFAULT_LOG_RETENTION, type LogRetention, sweepLogs } from "./store";

export const LOG_SWEEP_INTERVAL_MS = 10 * 60 * 1000;

/** One sweep, logged when it removed something. */
export async function sweepLogsOnce(db: Db, retention: LogRetention, now: Date, logger: Logger): Promise<void> {
  const { byAge, byCount } = await sweepLogs(db, retention, now);
  if (byAge + byCount > 0) logger.info("log sweep: removed lines", { byAge, byCount });
}

/** Starts the loop; stop() ends it and waits for a run in progress. */
export function startLogSweeper(opts: { db: Db; logger: Logger; retention?: LogRetention; intervalMs?: number }) {
  const retention = opts.retention ?? DEFAULT_LOG_RETENTION;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const run = () => {
    running = sweepLogsOnce(opts.db, retention, new Date(), opts.logger)
      .catch((e) => opts.logger.error("log sweep failed", describeError(e)))
      .finally(() => {
        running = undefined;
        if (!stopped) timer = setTimeout(run, opts.intervalMs ?? LOG_SWEEP_INTERVAL_MS).unref();
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
