/**
 * GET /healthz and GET /readyz on every runtime: public, at the root, no database
 * behind /healthz; /readyz answers 503 naming the check that failed (a database
 * that cannot be reached, a migration level behind or ahead of the code's).
 */
import { afterEach, describe, expect, it } from "vitest";
import { CODE_MIGRATIONS, LATEST_MIGRATION, levelOf } from "../../../shared/db/migration-level";
import { expectStatus } from "../../support/harness";
import { openProbeApp, type ProbeApp } from "../../support/probe-apps";
import { currentRuntime, useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const runtime = currentRuntime();
const code = levelOf(LATEST_MIGRATION.tag);

describe("health and readiness", () => {
  let probe: ProbeApp | undefined;
  afterEach(async () => {
    await probe?.close();
    probe = undefined;
  });

  it("GET /healthz: 200 {status: ok}, no token, not cached", async () => {
    const res = await h.request("/healthz");
    expect(await expectStatus(res, 200)).toEqual({ status: "ok" });
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  it("GET /readyz: 200 with every check ok on a migrated database", async () => {
    const res = await h.request("/readyz");
    const body = await expectStatus<{ status: string; checks: Record<string, string> }>(res, 200);
    expect(body.status).toBe("ready");
    expect(body.checks).toMatchObject({ database: "ok", migrations: "ok" });
    // The self-hosted process checks its edge's route feed too (its runner is off in the harness).
    if (runtime !== "worker") expect(body.checks.edge).toBe("ok");
    expect(Object.values(body.checks).every((v) => v === "ok")).toBe(true);
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  it("the probes ignore credentials: a garbage token changes nothing", async () => {
    const headers = { authorization: "Bearer wsp_not-a-token" };
    await expectStatus(await h.request("/healthz", { headers }), 200);
    await expectStatus(await h.request("/readyz", { headers }), 200);
  });

  it("answers a poll every few milliseconds (no rate limit for a load balancer)", async () => {
    for (let i = 0; i < 30; i++) await expectStatus(await h.request("/readyz"), 200);
  });

  it("the probes are not under /api", async () => {
    expect((await h.request("/api/healthz")).status).toBe(404);
    expect((await h.request("/api/readyz")).status).toBe(404);
  });

  it("GET /readyz: 503 naming the database when it cannot be reached; /healthz stays 200", async () => {
    probe = await openProbeApp(runtime, "unreachable");
    const body = await expectStatus<{ status: string; checks: Record<string, string> }>(await probe.request("/readyz"), 503);
    expect(body.status).toBe("unready");
    expect(body.checks.database).toMatch(/^(unreachable|timeout: no answer within 2 s)$/);
    expect(body.checks.migrations).toBe("unknown");
    // Nothing of the failure's own text (host, database name, driver message).
    expect(JSON.stringify(body)).not.toMatch(/no_such_database|127\.0\.0\.1|postgres|does not exist/i);
    expect(await expectStatus(await probe.request("/healthz"), 200)).toEqual({ status: "ok" });
  });

  it("GET /readyz: 503 naming the migrations when the database is behind the code", async () => {
    probe = await openProbeApp(runtime, { recorded: CODE_MIGRATIONS.slice(0, 2) });
    const body = await expectStatus<{ status: string; checks: Record<string, string> }>(await probe.request("/readyz"), 503);
    expect(body).toMatchObject({ status: "unready", checks: { database: "ok", migrations: `behind: 0001 < ${code}` } });
  });

  it("GET /readyz: 503 naming the migrations when a newer version migrated the database", async () => {
    const newer = { tag: "9999_from_the_future", when: LATEST_MIGRATION.when + 60_000 };
    probe = await openProbeApp(runtime, { recorded: [...CODE_MIGRATIONS, newer] });
    const body = await expectStatus<{ status: string; checks: Record<string, string> }>(await probe.request("/readyz"), 503);
    const ahead = String(CODE_MIGRATIONS.length).padStart(4, "0");
    expect(body).toMatchObject({ status: "unready", checks: { database: "ok", migrations: `ahead: ${ahead} > ${code}` } });
  });
});
