/**
 * Disk and output limits against hostile apps. Disk (Postgres): with diskGb 1,
 * an app writing 2 GB as fast as it can is stopped and recorded (crashed, the
 * reason in its lines and its service.crashed event); a build doing the same
 * fails naming the limit, and its work directory is gone. Log flood (Postgres
 * and PGlite, whose one connection serializes every write): an app printing as
 * fast as the pipe takes it gets at most RUNNER_LOG_RATE (default 1000) lines
 * per second plus the burst (10x) stored, a `system` line counts the dropped
 * ones, and the API keeps answering during the flood: over 100 calls its median
 * stays within 2x (+10 ms) of the quiet median and no call takes 500 ms. (The
 * p99 of 100 calls is one call: on a busy 2-core machine it doubles by chance,
 * while a flood that stalls the server costs seconds.)
 */
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { seedTenant } from "../../support/harness";
import { hostileFiles, hostPidsOf, latencies, percentile, sandboxApps, sleep, useSandboxServer } from "../../support/sandbox-apps";

const RATE = 1000;
const BURST = 10 * RATE;

describe("sandbox (postgres): the disk limit", () => {
  const s = useSandboxServer({ kind: "postgres", prefix: "sbx_disk" });
  const a = sandboxApps(s);
  const { cleanups } = useCleanups("ws-sbx-disk-");

  it("an app writing 2 GB with diskGb 1 is stopped and recorded: 'disk limit (1 GB) exceeded'", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), { options: { startCommand: "node disk.js" }, resources: { diskGb: 1 } });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    const started = Date.now();
    let crashedAt: string | null = null;
    while (Date.now() - started < 40_000) {
      crashedAt = (await a.c.read(t, d.id)).crashedAt;
      if (crashedAt) break;
      await sleep(250);
    }
    console.log(`disk: the app was stopped ${Date.now() - started} ms after it answered`);
    expect(crashedAt, "the app was never stopped").not.toBeNull();
    const { text } = await a.lines(d.id);
    expect(text).toMatch(/Stopped: disk limit \(1 GB\) exceeded: the app's directory holds \d+(\.\d)? GB/);
    const [event] = await a.c.eventsOnce(projectId, "service.crashed");
    expect(event?.message).toContain("disk limit (1 GB) exceeded");
    expect(hostPidsOf(s, d.id)).toEqual([]);
    await a.retire(t, projectId);
    expect(existsSync(a.workDirOf(d.id))).toBe(false);
  }, 60_000);

  it("a build writing 2 GB with diskGb 1 fails naming the limit; its work directory is removed", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: { buildCommand: "node disk.js build", startCommand: "node hello.js" },
      resources: { diskGb: 1 },
    });
    cleanups.push(() => a.retire(t, projectId));
    const started = Date.now();
    const d = await a.settle(t, deployment.id);
    console.log(`disk: the build failed after ${Date.now() - started} ms`);
    expect(d.status).toBe("failed");
    expect(d.failureReason).toMatch(/^disk limit \(1 GB\) exceeded: the build wrote \d+(\.\d)? GB \(resources diskGb\)/);
    expect((await a.lines(d.id)).text).toMatch(/killed: the work directory holds \d+(\.\d)? GB/);
    expect(existsSync(a.workDirOf(d.id))).toBe(false);
  }, 60_000);
});

for (const kind of ["postgres", "pglite"] as const) {
  describe(`sandbox (${kind}): the log ingest limit`, () => {
    const s = useSandboxServer({ kind, prefix: `sbx_logs_${kind}` });
    const a = sandboxApps(s);
    const { cleanups } = useCleanups("ws-sbx-logs-");

    it("an app printing as fast as it can: stored lines bounded by the rate and burst, the dropped ones counted, the API still answering at once", async () => {
      const t = await seedTenant(s.server);
      const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), { options: { startCommand: "node flood.js" } });
      cleanups.push(() => a.retire(t, projectId));
      const d = await a.settle(t, deployment.id);
      expect(d.failureReason).toBeNull();
      expect(d.status).toBe("ready");

      const eluBefore = performance.eventLoopUtilization();
      const before = await latencies(s, t, 100);
      const eluQuiet = performance.eventLoopUtilization(eluBefore);
      const floodStarted = Date.now();
      expect((await a.ask(projectId, "/flood")).body).toBe("flooding");
      const eluFlood = performance.eventLoopUtilization();
      const during = await latencies(s, t, 100);
      const eluDuring = performance.eventLoopUtilization(eluFlood);
      // Long enough for a report of the dropped lines (one per 5 s).
      while (Date.now() - floodStarted < 8000) await sleep(100);
      await s.server.node.runner!.supervisor.stop(d.id);
      const floodSeconds = (Date.now() - floodStarted) / 1000;
      await sleep(1500);

      const { rows } = await a.lines(d.id);
      const stored = rows.filter((r) => r.stream === "stdout" && r.message === "flood-line").length;
      const reports = rows.filter(
        (r) => r.stream === "system" && /lines? dropped: over the log limit of 1000 lines per second \(RUNNER_LOG_RATE\)/.test(r.message),
      );
      const dropped = reports.reduce((n, r) => n + Number(/^(\d+)/.exec(r.message)?.[1] ?? 0), 0);
      const [p99Before, p99During] = [percentile(before, 99), percentile(during, 99)];
      console.log(
        `log flood (${kind}): ${stored} lines stored over ${floodSeconds.toFixed(1)} s (bound ${Math.round(RATE * floodSeconds + BURST)}), ` +
          `${dropped} reported dropped in ${reports.length} system line(s); API p50/p99 before ${percentile(before, 50).toFixed(1)}/${p99Before.toFixed(1)} ms, ` +
          `during ${percentile(during, 50).toFixed(1)}/${p99During.toFixed(1)} ms; the server's event loop busy ${(eluQuiet.utilization * 100).toFixed(0)} % before, ${(eluDuring.utilization * 100).toFixed(0)} % during`,
      );
      expect(stored).toBeLessThanOrEqual(RATE * floodSeconds + BURST);
      expect(stored).toBeGreaterThanOrEqual(BURST / 2);
      expect(reports.length).toBeGreaterThan(0);
      expect(dropped).toBeGreaterThan(stored);
      expect(percentile(during, 50)).toBeLessThanOrEqual(2 * percentile(before, 50) + 10);
      expect(p99During).toBeLessThan(500);
    }, 60_000);
  });
}
