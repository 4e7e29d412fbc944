/**
 * Build limits of the runner: a build over BUILD_TIMEOUT is killed (its whole
 * process group) and fails with a reason naming the setting; a cancel during
 * the build stops it at once (process group gone) and stays `canceled`.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectStatus, seedTenant } from "../../support/harness";
import { useCleanups } from "../../support/cleanups";
import { alive, runnerClient } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

const server = useRunnerServer({ prefix: "runner_limits", env: { BUILD_TIMEOUT: "5s" } });
const c = runnerClient(
  () => server,
  () => server.git,
);
const { tempDir } = useCleanups("ws-limits-");

async function waitForFile(path: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(path) || readFileSync(path, "utf8") === "") {
    if (Date.now() > deadline) throw new Error(`${path} never appeared`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Number(readFileSync(path, "utf8"));
}

async function untilDead(pid: number, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

describe("runner: build limits", () => {
  it("kills a build over BUILD_TIMEOUT (its process group) and fails it naming the setting", async () => {
    const t = await seedTenant(server);
    const pidFile = join(tempDir(), "pid");
    const { p } = await c.gitProject(t, [
      { key: "SLOW_BUILD", value: "1" },
      { key: "BUILD_PID_FILE", value: pidFile },
    ]);
    const started = Date.now();
    const d = await c.deploy(t, p.id);
    const grandchild = await waitForFile(pidFile);
    expect(alive(grandchild)).toBe(true);
    const failed = await c.waitFor(t, d.id, ["failed", "ready"], 30_000);
    expect(failed.status).toBe("failed");
    expect(failed.failureReason).toBe("build timed out after 5.0 s (BUILD_TIMEOUT)");
    expect(Date.now() - started).toBeGreaterThanOrEqual(5000);
    expect(await untilDead(grandchild)).toBe(true);
    expect((await c.eventsOnce(p.id, "build.failed")).length).toBe(1);
  });

  it("a cancel during the build stops it at once: process group gone, canceled stays, work directory removed", async () => {
    const t = await seedTenant(server);
    const pidFile = join(tempDir(), "pid");
    const { p } = await c.gitProject(t, [
      { key: "SLOW_BUILD", value: "1" },
      { key: "BUILD_PID_FILE", value: pidFile },
    ]);
    const d = await c.deploy(t, p.id);
    const grandchild = await waitForFile(pidFile);
    await expectStatus(await c.call(t, `/api/deployments/${d.id}/cancel`, { json: {} }), 200);
    expect(await untilDead(grandchild, 3000)).toBe(true);
    await new Promise((r) => setTimeout(r, 500));
    const after = await c.read(t, d.id);
    expect(after.status).toBe("canceled");
    expect(after.transitions.map((x) => x.status)).toEqual(["queued", "building", "canceled"]);
    expect(readdirSync(join(server.dataDir, "deployments"))).not.toContain(d.id);
    expect((await c.logsOf(d.id)).map((l) => l.message)).toContain("Canceled");
    expect(server.node.runner!.active()).not.toContain(d.id);
  });
});
