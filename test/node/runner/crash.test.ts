/**
 * A crashing app: the supervisor restarts it with backoff; after 5 crashes in
 * 10 minutes it gives up: the deployment keeps its record (ready, current) but
 * is marked crashed, no longer serves (no port), and `service.crashed` is emitted.
 */
import { describe, expect, it } from "vitest";
import { seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

// Shorter restart delays than an operator's (1 s doubling to 30 s): the same five restarts and give-up, in seconds rather than most of a minute.
const server = useRunnerServer({ prefix: "runner_crash", runner: { restart: { baseDelayMs: 200, maxDelayMs: 800 } } });
const c = runnerClient(
  () => server,
  () => server.git,
);

describe("runner: crashes", () => {
  it("restarts a crashed app, then gives up after repeated crashes: crashed_at, no port, service.crashed", { timeout: 180_000 }, async () => {
    const t = await seedTenant(server);
    // The app exits 1.5 s after each start: it answers (ready), then crashes again and again.
    const canaries = ["crash-plain-canary-7f3a", "crash-secret-canary-91bd"];
    const { p } = await c.gitProject(t, [
      { key: "CRASH_AFTER_MS", value: "1500" },
      { key: "PLAIN_CANARY", value: canaries[0]! },
      { key: "SECRET_CANARY", value: canaries[1]!, isSecret: true },
    ]);
    const d = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(d.status).toBe("ready");
    const deadline = Date.now() + 170_000;
    let row = await c.row(d.id);
    while (!row.crashedAt && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      row = await c.row(d.id);
    }
    expect(row.crashedAt).not.toBeNull();
    expect(row.port).toBeNull();
    expect(row).toMatchObject({ status: "ready", current: true });
    // Log lines are stored in batches (functions/logs/writer.ts, FLUSH_MS) and the row is marked first: the give-up
    // line is read once stored (it is flushed before service.crashed is emitted), within a bound.
    const runtimeLines = async () => (await c.logsOf(d.id)).filter((l) => l.kind === "runtime").map((l) => l.message);
    const linesDeadline = Date.now() + 5_000;
    let lines = await runtimeLines();
    while (!lines.some((m) => m.startsWith("Gave up restarting")) && Date.now() < linesDeadline) {
      await new Promise((r) => setTimeout(r, 50));
      lines = await runtimeLines();
    }
    expect(lines.filter((m) => m.startsWith("starting version")).length).toBeGreaterThanOrEqual(5);
    expect(lines.some((m) => /^Restarting web in .+ \(restart 1 of at most 5/.test(m))).toBe(true);
    expect(lines.some((m) => m.startsWith("Gave up restarting"))).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(await c.eventsOnce(p.id, "service.crashed")).toHaveLength(1);
    expect(server.node.runner!.supervisor.running().map((a) => a.deploymentId)).not.toContain(d.id);
    // The server's terminal said so, a plain line each (functions/self-hosted/runner/terminal-lines.ts), never a variable's value.
    const said = server.logs.filter((l) => l.includes(d.id) && !l.startsWith("{")).map((l) => l.replace(/^\S+ /, ""));
    const of = `deployment ${d.id} (project ${p.id})`;
    expect(said).toEqual(expect.arrayContaining([`${of}: building`, `${of}: deploying`, `${of}: ready, now its environment's live deployment`]));
    expect(said).toContain(`deployment ${d.id}: app crashed, restarting it`);
    expect(said.some((l) => new RegExp(`^deployment ${d.id}: app up again on port \\d+$`).test(l))).toBe(true);
    expect(said.filter((l) => l.startsWith(`${of}: app given up`))).toHaveLength(1);
    for (const canary of canaries) expect(server.logs.join("\n")).not.toContain(canary);
    // Reconcile does not bring a crashed deployment back.
    server.node.services.wakeRunner?.();
    await new Promise((r) => setTimeout(r, 1000));
    expect(server.node.runner!.supervisor.running().map((a) => a.deploymentId)).not.toContain(d.id);
  });
});
