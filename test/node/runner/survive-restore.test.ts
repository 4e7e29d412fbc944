/**
 * An app that cannot be started when the server starts again is retried, not
 * given up at once: its deployment stays current (not crashed) and its runtime
 * log says why and when the next try is; once the cause is gone (here: the
 * build's output the app reads is put back), the next try brings it up.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RESTORE_RETRY_MS } from "../../../functions/self-hosted/runner/runner";
import { seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

const server = useRunnerServer({ prefix: "runner_restore_retry" });
const c = runnerClient(
  () => server,
  () => server.git,
);

describe("runner: restore at start", () => {
  it("retries an app that fails to start, saying why and when, and brings it up once it can", { timeout: 120_000 }, async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t);
    const d = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(d.status).toBe("ready");

    // While the server is down, the file the app reads at start goes missing.
    await server.close();
    const info = join(server.dataDir, "deployments", d.id, "src", "build", "info.json");
    const saved = readFileSync(info);
    rmSync(info);
    await server.reopen();

    const runtime = async () => (await c.logsOf(d.id)).filter((l) => l.kind === "runtime" && l.stream === "system").map((l) => l.message);
    const deadline = Date.now() + 20_000;
    let lines = await runtime();
    while (!lines.some((m) => m.startsWith("The app could not be started")) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      lines = await runtime();
    }
    const said = lines.find((m) => m.startsWith("The app could not be started"));
    expect(said).toMatch(
      new RegExp(
        `^The app could not be started: start failed: the app exited with code 1 before answering.*Next try in ${RESTORE_RETRY_MS[0]! / 1000}\\.0 s \\(try 2 of ${RESTORE_RETRY_MS.length + 1}\\)$`,
        "s",
      ),
    );
    expect(await c.row(d.id)).toMatchObject({ status: "ready", current: true, crashedAt: null, port: null });

    // The cause goes away: the next try starts it.
    writeFileSync(info, saved);
    const upBy = Date.now() + RESTORE_RETRY_MS[0]! + 15_000;
    let row = await c.row(d.id);
    while (!row.port && Date.now() < upBy) {
      await new Promise((r) => setTimeout(r, 200));
      row = await c.row(d.id);
    }
    expect(row.port).not.toBeNull();
    expect((await c.askApp(row.port!)).version).toBeTruthy();
    expect(row.crashedAt).toBeNull();
    expect(await c.eventsOnce(p.id, "service.crashed", 0)).toHaveLength(0);
  });
});
