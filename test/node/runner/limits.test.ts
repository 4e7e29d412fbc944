/**
 * Build limits of the runner: a build over BUILD_TIMEOUT is killed (its whole
 * process group) and fails with a reason naming the setting; a cancel during
 * the build stops it at once (process group gone) and stays `canceled`.
 *
 * The build runs in the runner's sandbox: it writes its marker file inside its
 * own directory (/app there, DATA_DIR/deployments/<id>/src here), and its
 * processes are found on the host by the deployment's cgroup (processesOf), not
 * by the pid it reports (its pid namespace's own).
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectStatus, seedTenant } from "../../support/harness";
import { processesOf, runnerClient, untilNoProcessOf } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

const server = useRunnerServer({ prefix: "runner_limits", env: { BUILD_TIMEOUT: "5s" } });
const c = runnerClient(
  () => server,
  () => server.git,
);

/** The build's marker file (BUILD_PID_FILE, relative to its directory), written once its grandchild runs. */
const MARKER = "build-pid";

/** Waits until the deployment's build wrote its marker into its source directory. */
async function waitForMarker(deploymentId: string, timeoutMs = 20_000) {
  const path = join(server.dataDir, "deployments", deploymentId, "src", MARKER);
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(path) || readFileSync(path, "utf8") === "") {
    if (Date.now() > deadline) throw new Error(`${path} never appeared`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("runner: build limits", () => {
  it("kills a build over BUILD_TIMEOUT (its process group) and fails it naming the setting", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [
      { key: "SLOW_BUILD", value: "1" },
      { key: "BUILD_PID_FILE", value: MARKER },
    ]);
    const started = Date.now();
    const d = await c.deploy(t, p.id);
    await waitForMarker(d.id);
    expect(processesOf(d.id).map((x) => x.name)).toContain("sleep");
    const failed = await c.waitFor(t, d.id, ["failed", "ready"], 30_000);
    expect(failed.status).toBe("failed");
    expect(failed.failureReason).toBe("build timed out after 5.0 s (BUILD_TIMEOUT)");
    expect(Date.now() - started).toBeGreaterThanOrEqual(5000);
    expect(await untilNoProcessOf(d.id, 5000)).toEqual([]);
    expect((await c.eventsOnce(p.id, "build.failed")).length).toBe(1);
  });

  it("a cancel during the build stops it at once: process group gone, canceled stays, work directory removed", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [
      { key: "SLOW_BUILD", value: "1" },
      { key: "BUILD_PID_FILE", value: MARKER },
    ]);
    const d = await c.deploy(t, p.id);
    await waitForMarker(d.id);
    expect(processesOf(d.id).map((x) => x.name)).toContain("sleep");
    await expectStatus(await c.call(t, `/api/deployments/${d.id}/cancel`, { json: {} }), 200);
    expect(await untilNoProcessOf(d.id, 3000)).toEqual([]);
    await new Promise((r) => setTimeout(r, 500));
    const after = await c.read(t, d.id);
    expect(after.status).toBe("canceled");
    expect(after.transitions.map((x) => x.status)).toEqual(["queued", "building", "canceled"]);
    expect(readdirSync(join(server.dataDir, "deployments"))).not.toContain(d.id);
    expect((await c.logsOf(d.id)).map((l) => l.message)).toContain("Canceled");
    expect(server.node.runner!.active()).not.toContain(d.id);
  });
});
