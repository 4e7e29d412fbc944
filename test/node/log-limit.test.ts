/** The per-deployment log ingest limit: a burst, then the rate; drops counted and reported once per interval; deployments apart. */
import { describe, expect, it } from "vitest";
import { BURST_SECONDS, createLogLimiter, REPORT_MS } from "../../functions/self-hosted/runner/log-limit";

describe("log limiter", () => {
  it("admits a burst of rate × BURST_SECONDS, then the rate, and counts the rest", () => {
    const limiter = createLogLimiter(100);
    let admitted = 0;
    for (let i = 0; i < 5000; i++) if (limiter.admit("d1", 0)) admitted++;
    expect(admitted).toBe(100 * BURST_SECONDS);
    // One second later: one second's worth more.
    admitted = 0;
    for (let i = 0; i < 5000; i++) if (limiter.admit("d1", 1000)) admitted++;
    expect(admitted).toBe(100);
    // Another deployment has its own bucket.
    expect(limiter.admit("d2", 1000)).toBe(true);
    expect(limiter.due(1000)).toEqual([]);
    expect(limiter.due(REPORT_MS)).toEqual([{ deploymentId: "d1", dropped: 5000 - 100 * BURST_SECONDS + 4900 }]);
    expect(limiter.due(REPORT_MS + 1)).toEqual([]);
  });
});

describe("a process over the log limit", () => {
  it("is throttled: its output is not split into lines, it is read in bursts and the rest counted as skipped", async () => {
    const { spawnProcess, THROTTLE_MS } = await import("../../functions/self-hosted/runner/processes");
    let calls = 0;
    let skipped = 0;
    const proc = spawnProcess({
      command: "exec yes",
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      // The first 100 lines are kept, then every line is refused.
      onLine: () => ++calls <= 100,
      onSkipped: (n) => {
        skipped += n;
      },
    });
    await new Promise((r) => setTimeout(r, 1000));
    const [refused, skippedInASecond] = [calls - 100, skipped];
    await proc.stop(0);
    // One refused line per burst, a burst every THROTTLE_MS at most (timers may run a little late, never early).
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThanOrEqual(1000 / THROTTLE_MS + 2);
    // Bursts are at most what the pipe held (64 KiB of "y\n"): `yes` alone writes far more per second.
    expect(skippedInASecond).toBeGreaterThan(0);
    expect(skippedInASecond).toBeLessThan((1000 / THROTTLE_MS + 2) * 65_536);
  });
});
