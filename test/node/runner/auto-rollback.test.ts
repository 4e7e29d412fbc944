/**
 * autoRollback (on for production by default): a deployment that went live and
 * then crash-loops past the restart policy is given up, and the previous ready
 * deployment is promoted in its place, with its own pinned variables; said in
 * both runtime logs and in the one `service.crashed` event. With autoRollback
 * off, the crashed deployment stays current and the project reads `crashed`.
 * (The restart policy is shortened: 2 restarts, 100 ms apart.)
 */
import { describe, expect, it } from "vitest";
import { seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

const server = useRunnerServer({ prefix: "runner_rollback", runner: { restart: { baseDelayMs: 100, maxDelayMs: 200, maxRestarts: 2, windowMs: 60_000 } } });
const c = runnerClient(
  () => server,
  () => server.git,
);

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("runner: autoRollback", () => {
  it("promotes the previous deployment once the current one is given up, with its own variables, and says so", { timeout: 120_000 }, async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [{ key: "APP_VERSION", value: "good" }]);
    const good = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(good.status).toBe("ready");

    // The next version answers, then exits 1.5 s after every start.
    await c.setVars(t, p.id, [
      { key: "APP_VERSION", value: "bad" },
      { key: "CRASH_AFTER_MS", value: "1500" },
    ]);
    const bad = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(bad.status).toBe("ready");

    const rolled = await until(
      () => c.row(good.id),
      (r) => r.current && r.port !== null,
    );
    expect(rolled).toMatchObject({ current: true, crashedAt: null });
    expect(await c.row(bad.id)).toMatchObject({ current: false, crashedAt: expect.any(Date) });
    // The good build runs with the variables it pinned: no CRASH_AFTER_MS.
    const answer = await c.askApp(rolled.port!);
    expect(answer.version).toBe("good");
    expect(answer.env.CRASH_AFTER_MS).toBeUndefined();

    const events = await c.eventsOnce(p.id, "service.crashed");
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ deploymentId: bad.id, rolledBackTo: good.id });
    expect(events[0]!.message).toContain(`deployment ${good.id} was promoted in its place (autoRollback)`);
    const badLines = (await c.logsOf(bad.id)).map((l) => l.message);
    expect(badLines).toContain(`Rolled back: deployment ${good.id} is production's current deployment again (autoRollback)`);
    const project = await c.call(t, `/api/projects/${p.id}`);
    expect(((await project.json()) as { status: string }).status).toBe("live");
  });

  it("with autoRollback off, the crashed deployment stays current and the project reads crashed, with the reason", { timeout: 120_000 }, async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t);
    const off = await c.call(t, `/api/projects/${p.id}/environments/production`, { method: "PATCH", json: { autoRollback: false } });
    expect(off.status).toBe(200);
    expect(await off.json()).toMatchObject({ name: "production", autoRollback: false });
    const first = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(first.status).toBe("ready");
    await c.setVars(t, p.id, [{ key: "CRASH_AFTER_MS", value: "1500" }]);
    const bad = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);

    const row = await until(
      () => c.row(bad.id),
      (r) => r.crashedAt !== null,
    );
    expect(row).toMatchObject({ current: true, port: null });
    expect(await c.row(first.id)).toMatchObject({ current: false });
    const view = (await (await c.call(t, `/api/projects/${p.id}`)).json()) as { status: string; statusReason: string };
    expect(view.status).toBe("crashed");
    expect(view.statusReason).toContain(bad.id);
    expect((await c.eventsOnce(p.id, "service.crashed"))[0]!.data).not.toHaveProperty("rolledBackTo");
  });
});
