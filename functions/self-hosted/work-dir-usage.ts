/**
 * The runner's record of a kept work directory's size (functions/deployments/artifacts.ts
 * sums it per organization against ORG_WORKDIR_QUOTA_MB). Measured by `du -sk` in a child
 * process: a build's node_modules can hold 100,000 files, and walking them on the
 * server's event loop would stall the API.
 */
import { execFile } from "node:child_process";
import { describeError } from "../../shared/http/error-log";
import type { Logger } from "../../shared/http/logger";

const DU_TIMEOUT_MS = 120_000;

/** Disk usage of `dir` in bytes (its blocks, as `du -sk` counts them), or null when it cannot be measured. */
export function measureDir(dir: string): Promise<number | null> {
  return new Promise((resolve) => {
    // du exits 1 when some entry is unreadable (or vanished meanwhile) and still prints the total of the rest.
    execFile("du", ["-sk", dir], { timeout: DU_TIMEOUT_MS, maxBuffer: 64 * 1024 }, (_error, stdout) => {
      const kib = /^(\d+)\s/.exec(String(stdout ?? ""))?.[1];
      resolve(kib === undefined ? null : Number(kib) * 1024);
    });
  });
}

/** Measures a ready deployment's work directory and records it; never throws (a failure is logged, the deployment counts 0). */
export async function recordWorkDirUsage(
  deps: { record: (deploymentId: string, bytes: number) => Promise<void>; logger: Logger },
  deploymentId: string,
  dir: string,
): Promise<void> {
  try {
    const bytes = await measureDir(dir);
    if (bytes === null) {
      deps.logger.error("work_dir_measure_failed", { deploymentId });
      return;
    }
    await deps.record(deploymentId, bytes);
  } catch (error) {
    deps.logger.error("work_dir_record_failed", { deploymentId, ...describeError(error) });
  }
}
