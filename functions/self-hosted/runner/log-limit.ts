/**
 * The per-deployment log ingest limit (RUNNER_LOG_RATE lines per second, with a
 * burst of BURST_SECONDS times that): a token bucket per deployment, refilled
 * by elapsed time, so one app printing in a loop can neither fill the disk nor
 * stall the log store for the others. Lines over the limit are dropped and
 * counted; once per REPORT_MS while dropping, one `system` line says how many.
 * The burst is small (2 s): storing 10 s worth at once held the API's p99 at 3x
 * on Postgres while a flood began. A process whose line was refused is also
 * throttled by processes.ts (THROTTLE_MS), so dropping costs almost nothing.
 */
import { countLogLines } from "../../operations/metrics/process-metrics";

export const BURST_SECONDS = 2;
export const REPORT_MS = 5_000;

export interface LogLimiter {
  /** Whether one more line of the deployment may be stored now. */
  admit(deploymentId: string, nowMs: number): boolean;
  /** Lines of the deployment skipped unread while over the limit (processes.ts): counted as dropped. */
  skipped(deploymentId: string, lines: number): void;
  /** Deployments with dropped lines whose report is due: the counts (reset). Buckets quiet for a minute are forgotten. */
  due(nowMs: number): Array<{ deploymentId: string; dropped: number }>;
}

/** A deployment's bucket, full and without a line for this long, is dropped (it would start full again anyway). */
const IDLE_MS = 60_000;

export function createLogLimiter(ratePerSecond: number): LogLimiter {
  const capacity = ratePerSecond * BURST_SECONDS;
  const buckets = new Map<string, { tokens: number; at: number; dropped: number; since: number }>();
  return {
    admit(id, now) {
      let b = buckets.get(id);
      if (!b) {
        b = { tokens: capacity, at: now, dropped: 0, since: now };
        buckets.set(id, b);
      }
      b.tokens = Math.min(capacity, b.tokens + ((now - b.at) / 1000) * ratePerSecond);
      b.at = now;
      if (b.tokens >= 1) {
        b.tokens -= 1;
        return true;
      }
      if (b.dropped === 0) b.since = now;
      b.dropped += 1;
      countLogLines("dropped");
      return false;
    },
    skipped(id, lines) {
      const b = buckets.get(id);
      if (b) b.dropped += lines;
      countLogLines("dropped", lines);
    },
    due(now) {
      const out: Array<{ deploymentId: string; dropped: number }> = [];
      for (const [id, b] of buckets) {
        if (b.dropped > 0 && now - b.since >= REPORT_MS) {
          out.push({ deploymentId: id, dropped: b.dropped });
          b.dropped = 0;
        } else if (b.dropped === 0 && now - b.at >= IDLE_MS) buckets.delete(id);
      }
      return out;
    },
  };
}
