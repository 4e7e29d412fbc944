/**
 * Limits that hold against hostile apps (Postgres; the limits are the kernel's,
 * whatever the database): a fork bomb stops at RUNNER_PIDS_MAX while the API
 * keeps answering; a memory hog is killed at the project's memoryMb, in the app,
 * after `setsid` (a new session, out of the app's process group) and in a
 * build, with the reason recorded as "memory limit (N MiB) exceeded"; a busy
 * loop gets no more CPU than cpuCores (measured from the host, utime + stime of
 * every process of the app's cgroup over 3 s).
 */
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { seedTenant } from "../../support/harness";
import {
  cgroupFile,
  cgroupsOf,
  cpuSecondsOf,
  hostileFiles,
  hostPidsOf,
  percentile,
  sandboxApps,
  sleep,
  timedCall,
  useSandboxServer,
} from "../../support/sandbox-apps";

const run = promisify(execFile);
const PIDS_MAX = 256;

const s = useSandboxServer({ kind: "postgres", prefix: "sbx_limits" });
const a = sandboxApps(s);
const { cleanups } = useCleanups("ws-sbx-limits-");

/** Host processes running as `uid` now. */
function processesOf(uid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, "utf8");
      if (new RegExp(`^Uid:\\s+${uid}\\s`, "m").test(status)) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

describe("sandbox: limits that hold", () => {
  it("a fork bomb stops at the pids limit; the API answers within 500 ms meanwhile; nothing of it outlives the app", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), { options: { startCommand: "node forkbomb.js" } });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    const uid = (await a.uidOf(projectId))!;
    const [group] = cgroupsOf(s, d.id, "pids").filter((g) => g.name.includes(".web."));
    expect(group, "the app's pids cgroup").toBeDefined();
    expect(cgroupFile(group!.dir, "pids.max")?.trim()).toBe(String(PIDS_MAX));

    // The bomb goes off once the app answered (the health check did); for ~5 s: the group's count, the kernel's refusals, the API's answers, a fork of the server.
    const api: number[] = [];
    let peak = 0;
    let hitMax = 0;
    const started = Date.now();
    while (Date.now() - started < 5000) {
      peak = Math.max(peak, Number(cgroupFile(group!.dir, "pids.current") ?? 0));
      hitMax = Number(/max (\d+)/.exec(cgroupFile(group!.dir, "pids.events") ?? "")?.[1] ?? 0);
      api.push(await timedCall(s, t));
      await sleep(100);
    }
    const forkStarted = performance.now();
    await run("true");
    const serverFork = performance.now() - forkStarted;
    const inside = JSON.parse((await a.ask(projectId)).body) as { started: number; refused: number };
    console.log(
      `fork bomb: peak ${peak} pids (max ${PIDS_MAX}), ${hitMax} forks refused by the kernel, the app saw ${inside.started} spawns and ${inside.refused} refusals; ` +
        `API p50 ${percentile(api, 50).toFixed(1)} ms, max ${Math.max(...api).toFixed(1)} ms over ${api.length} calls; a fork of the server took ${serverFork.toFixed(0)} ms`,
    );
    expect(peak).toBeLessThanOrEqual(PIDS_MAX);
    expect(peak).toBeGreaterThan(PIDS_MAX - 20);
    expect(hitMax).toBeGreaterThan(0);
    expect(Math.max(...api)).toBeLessThan(500);
    expect(serverFork).toBeLessThan(2000);
    expect(processesOf(uid).length).toBeLessThanOrEqual(PIDS_MAX);

    // Stopping the app ends every process of the bomb (frozen, then killed).
    const stopStarted = Date.now();
    await a.retire(t, projectId);
    console.log(`fork bomb: stopped in ${Date.now() - stopStarted} ms`);
    expect(hostPidsOf(s, d.id)).toEqual([]);
    expect(processesOf(uid)).toEqual([]);
  }, 60_000);

  it("a memory hog in the app is killed at memoryMb: the deployment fails with 'memory limit (128 MiB) exceeded'", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: { startCommand: "node memory.js" },
      vars: [{ key: "MEMORY_MODE", value: "direct" }],
      resources: { production: { memoryMb: 128 } },
    });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.status).toBe("failed");
    expect(d.failureReason).toContain("memory limit (128 MiB) exceeded");
    expect((await a.lines(d.id)).text).toContain("allocating in the app");
  }, 60_000);

  it("a memory hog after setsid (a new session, out of the app's process group) is killed too, and recorded", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: { startCommand: "node memory.js" },
      vars: [{ key: "MEMORY_MODE", value: "setsid" }],
      resources: { production: { memoryMb: 128 } },
    });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    const { text } = await a.lines(d.id);
    expect(text).toMatch(/hog started \(pid \d+\)/);
    expect(text).toContain("the hog is gone");
    expect(d.status).toBe("failed");
    expect(d.failureReason).toContain("memory limit (128 MiB) exceeded");
  }, 60_000);

  it("a detached hog started by a running app is killed at the limit while the app keeps answering", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: { startCommand: "node memory.js" },
      vars: [{ key: "MEMORY_MODE", value: "setsid-running" }],
      resources: { production: { memoryMb: 128 } },
    });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    const [memory] = cgroupsOf(s, d.id, "memory").filter((g) => g.name.includes(".web."));
    expect(memory, "the app's memory cgroup").toBeDefined();
    expect(cgroupFile(memory!.dir, "memory.limit_in_bytes")?.trim()).toBe(String(128 * 1024 * 1024));
    let hog: number | null = -1;
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      hog = (JSON.parse((await a.ask(projectId)).body) as { hog: number | null }).hog;
      if (hog === null) break;
      await sleep(200);
    }
    expect(hog, "the hog is still running").toBeNull();
    const oom = cgroupFile(memory!.dir, "memory.oom_control") ?? "";
    const kills = Number(/oom_kill (\d+)/.exec(oom)?.[1] ?? cgroupFile(memory!.dir, "memory.failcnt") ?? 0);
    const peak = Number(cgroupFile(memory!.dir, "memory.max_usage_in_bytes") ?? 0);
    console.log(`memory: detached hog killed (oom kills ${kills}); the group's peak ${(peak / 1024 / 1024).toFixed(1)} MiB of 128 MiB`);
    expect(kills).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(128 * 1024 * 1024);
    expect((await a.ask(projectId)).status).toBe(200);
  }, 60_000);

  it("a memory hog in a build, behind setsid, fails the build with 'memory limit (256 MiB) exceeded'", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: { buildCommand: "setsid -w node hog.js", startCommand: "node hello.js" },
      resources: { build: { memoryMb: 256 } },
    });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.status).toBe("failed");
    expect(d.failureReason).toContain("memory limit (256 MiB) exceeded");
  }, 60_000);

  it("a busy loop gets no more CPU than cpuCores (0.5, set through the resources API) + 20 %", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: { startCommand: "node cpu.js" },
      vars: [{ key: "BUSY_PROCESSES", value: "2" }],
      resources: { production: { cpuCores: 0.5 } },
    });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.failureReason).toBeNull();
    const [cpu] = cgroupsOf(s, d.id, "cpu").filter((g) => g.name.includes(".web."));
    expect(cpu, "the app's cpu cgroup").toBeDefined();
    expect(cgroupFile(cpu!.dir, "cpu.cfs_quota_us")?.trim()).toBe("50000");
    expect(cgroupFile(cpu!.dir, "cpu.cfs_period_us")?.trim()).toBe("100000");
    // The two spinners are up (three node processes and more in the group).
    const deadline = Date.now() + 10_000;
    while (hostPidsOf(s, d.id).length < 4 && Date.now() < deadline) await sleep(100);
    await sleep(500);

    const pids = hostPidsOf(s, d.id);
    const before = pids.reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
    const t0 = performance.now();
    await sleep(3000);
    const after = pids.reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
    const share = (after - before) / ((performance.now() - t0) / 1000);
    const throttled = /nr_throttled (\d+)/.exec(cgroupFile(cpu!.dir, "cpu.stat") ?? "")?.[1];
    console.log(`cpu: ${pids.length} processes used ${share.toFixed(3)} cores over 3 s (quota 0.5; throttled ${throttled} periods)`);
    expect(share).toBeLessThanOrEqual(0.5 * 1.2);
    expect(share).toBeGreaterThan(0.05);
    expect(Number(throttled)).toBeGreaterThan(0);
  }, 60_000);
});
