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
    expect(limiter.due(REPORT_MS)).toEqual([{ deploymentId: "d1", dropped: 4000 + 4900 }]);
    expect(limiter.due(REPORT_MS + 1)).toEqual([]);
  });
});
