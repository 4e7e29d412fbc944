/**
 * The probes on the self-hosted listener and its loops: /healthz and /readyz
 * reach the API for the API's own names only (any other Host is an app's, through
 * the edge); a stalled loop (the runner's poll, the edge's route feed) makes
 * /readyz 503 naming it. The start line says what was migrated.
 */
import { describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { CODE_MIGRATIONS, LATEST_MIGRATION } from "../../shared/db/migration-level";
import { useCleanups } from "../support/cleanups";
import { createApp } from "../../functions/app";
import { silentLogger } from "../../shared/http/logger";
import { buildRequest, eventually, expectStatus } from "../support/harness";
import { runnerFixture, startRunnerServer } from "../support/runner-harness";
import { openProbeApp } from "../support/probe-apps-node";
import { rawGet } from "../support/raw-http";

const { cleanups, tempDir } = useCleanups("ws-health-");

describe("readiness of the self-hosted loops", () => {
  const tick = (agoMs: number | undefined) => () => (agoMs === undefined ? undefined : new Date(Date.now() - agoMs));

  it("a stalled runner loop makes /readyz 503 naming runner; a fresh pass makes it ready", async () => {
    let runnerAgo: number | undefined = 95_000;
    const loops = [
      { name: "edge", lastTickAt: tick(0), stalledAfterMs: 30_000 },
      { name: "runner", lastTickAt: () => tick(runnerAgo)(), stalledAfterMs: 30_000 },
    ];
    const app = await openProbeApp("node-pglite", { recorded: [...CODE_MIGRATIONS] }, loops);
    cleanups.push(() => app.close());

    const stalled = await expectStatus(await app.request("/readyz"), 503);
    expect(stalled).toEqual({ status: "unready", checks: { database: "ok", migrations: "ok", edge: "ok", runner: "stalled 95 s" } });

    runnerAgo = undefined;
    expect((await expectStatus(await app.request("/readyz"), 503)).checks.runner).toBe("starting: no pass yet");

    runnerAgo = 1_000;
    expect(await expectStatus(await app.request("/readyz"), 200)).toEqual({
      status: "ready",
      checks: { database: "ok", migrations: "ok", edge: "ok", runner: "ok" },
    });
    // /healthz never looks at the loops.
    runnerAgo = 600_000;
    await expectStatus(await app.request("/healthz"), 200);
  });

  it("a stalled edge feed makes /readyz 503 naming edge", async () => {
    const app = await openProbeApp("node-pglite", { recorded: [...CODE_MIGRATIONS] }, [{ name: "edge", lastTickAt: tick(45_000), stalledAfterMs: 30_000 }]);
    cleanups.push(() => app.close());
    expect((await expectStatus(await app.request("/readyz"), 503)).checks).toEqual({ database: "ok", migrations: "ok", edge: "stalled 45 s" });
  });
});

describe.runIf(inject("pgKind") === "postgres")("readiness of a real runner and edge", () => {
  it("/readyz reads the running runner's and edge's last pass: both ok once the runner has polled", async () => {
    const fixture = await runnerFixture("ws_readyz_runner");
    cleanups.push(() => fixture.drop());
    const server = await startRunnerServer({ databaseUrl: fixture.db.url, dataDir: fixture.dataDir, gitUrl: "http://127.0.0.1:9" });
    cleanups.push(() => server.close());
    expect(server.node.loops.map((l) => l.name)).toEqual(["edge", "runner"]);
    const app = createApp({ services: () => server.node.services, logger: silentLogger, extraRouters: server.node.extraRouters, loops: server.node.loops });
    const body = await eventually(async () => expectStatus(await app.fetch(buildRequest("/readyz")), 200), 10_000);
    expect(body).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok", edge: "ok", runner: "ok" } });
    expect(Date.now() - server.node.runner!.lastTickAt()!.getTime()).toBeLessThan(10_000);
  });
});

describe("the probes on the self-hosted listener", () => {
  it("reach the API on its own names, an app's Host reaches the edge; the start says what it migrated", async () => {
    const dataDir = tempDir();
    const lines: string[] = [];
    const start = () =>
      startSelfHosted(
        loadNodeConfig({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", DATA_DIR: dataDir, SHARED_DOMAIN: "apps.test", RUNNER: "off" }),
        (l) => lines.push(l),
      );
    let server: RunningServer = await start();
    cleanups.push(() => server.close());
    expect(lines.filter((l) => l.startsWith("Migrations:"))).toEqual([
      `Migrations: applied ${CODE_MIGRATIONS.length} (${CODE_MIGRATIONS.map((m) => m.tag).join(", ")}); database at ${LATEST_MIGRATION.tag}`,
    ]);
    const port = Number(new URL(server.url).port);

    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
      const health = await rawGet(port, host, "/healthz");
      expect(health.status, host).toBe(200);
      expect(JSON.parse(health.body)).toEqual({ status: "ok" });
      const ready = await rawGet(port, host, "/readyz");
      expect(ready.status, ready.body).toBe(200);
      expect(JSON.parse(ready.body)).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok", edge: "ok" } });
    }
    // Another name is an app's: the edge answers (nothing deployed there), not the API's probe.
    const app = await rawGet(port, "shop.apps.test", "/healthz");
    expect(app.status).toBe(404);
    expect(app.headers["x-workspace-edge"]).toBeDefined();
    expect(app.body).not.toContain('"status":"ok"');

    // A restart finds nothing to apply, and says so.
    await server.close();
    lines.length = 0;
    server = await start();
    expect(lines.filter((l) => l.startsWith("Migrations:"))).toEqual([`Migrations: none to apply (database at ${LATEST_MIGRATION.tag})`]);
  });
});
