/**
 * Immutable deployments with the real runner (real processes, real git host,
 * Postgres): a deployment runs the variables it pinned when queued. The fixture
 * app answers with its environment: deployed without GREETING, then GREETING set
 * and redeployed (the app shows it), the first deployment promoted back once its
 * app stopped (a rollback: the runner starts it again from its kept build, and the
 * app no longer has GREETING, though the live variables do), the second promoted
 * again (GREETING is back). The project says a redeploy is needed
 * while what runs differs from the live configuration. Secrets of the snapshot
 * are in no table in the clear.
 */
import { describe, expect, it } from "vitest";
import { dumpAllTables, expectStatus, type Member, seedTenant } from "../../support/harness";
import { type Deployment, runnerClient, untilNoProcessOf } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

const CANARY = "canary-snapshot-5d2f81a6c4";

const server = useRunnerServer({ prefix: "runner_immutable" });
const c = runnerClient(
  () => server,
  () => server.git,
);

type Answer = Awaited<ReturnType<typeof c.askApp>>;

/** The app answering on the project's current port once it is the build of `d` (its build time tells which build answers). */
async function answerOf(projectId: string, builtAt: number): Promise<Answer> {
  const deadline = Date.now() + 20_000;
  let last: Answer | undefined;
  while (Date.now() < deadline) {
    const port = await c.currentPort(projectId);
    last = port ? await c.askApp(port).catch(() => undefined) : undefined;
    if (last?.builtAt === builtAt) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the build of ${builtAt} did not answer (last: ${last?.builtAt})`);
}

const redeployState = async (t: Member, projectId: string) => {
  const view = await expectStatus<{ needsRedeploy: boolean; changes: string[] }>(await c.call(t, `/api/projects/${projectId}`), 200);
  return { needsRedeploy: view.needsRedeploy, changes: view.changes };
};

const ready = async (t: Member, d: Deployment) => {
  const done = await c.waitFor(t, d.id, ["ready", "failed"]);
  expect(done.failureReason).toBeNull();
  expect(done.status).toBe("ready");
  return done;
};

describe("runner: a deployment runs the configuration it pinned", () => {
  it("promote restores the variables with the code: GREETING unset, set and redeployed, rolled back, promoted again", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [{ key: "APP_VERSION", value: "v1" }]);
    const first = await ready(t, await c.deploy(t, p.id));
    const one = await answerOf(p.id, (await c.askApp((await c.currentPort(p.id))!)).builtAt);
    expect(one.env.GREETING).toBeUndefined();
    expect(await redeployState(t, p.id)).toEqual({ needsRedeploy: false, changes: [] });

    await c.setVars(t, p.id, [
      { key: "GREETING", value: "hello" },
      { key: "SECRET_CANARY", value: CANARY, isSecret: true },
    ]);
    expect(await redeployState(t, p.id)).toEqual({ needsRedeploy: true, changes: ["variables"] });
    const second = await ready(t, await c.deploy(t, p.id));
    const two = await answerOf(p.id, (await c.askApp((await c.currentPort(p.id))!)).builtAt);
    expect(two.builtAt).not.toBe(one.builtAt);
    expect(two.env.GREETING).toBe("hello");
    expect(two.env.SECRET_CANARY).toBe(CANARY);
    expect(await redeployState(t, p.id)).toEqual({ needsRedeploy: false, changes: [] });

    // Rollback once the first app has stopped (as a person in the console does it): the runner starts
    // the first build again from its kept work directory, with what it pinned (it used to read the live variables).
    expect(await untilNoProcessOf(first.id)).toEqual([]);
    await expectStatus(await c.call(t, `/api/deployments/${first.id}/promote`, { json: {} }), 200);
    const back = await answerOf(p.id, one.builtAt);
    expect(back.instance).not.toBe(one.instance);
    expect(back.env.GREETING).toBeUndefined();
    expect(back.env.SECRET_CANARY).toBeUndefined();
    expect(back.env.APP_VERSION).toBe("v1");
    // The live variables have GREETING: what runs is older.
    expect(await redeployState(t, p.id)).toEqual({ needsRedeploy: true, changes: ["variables"] });

    expect(await untilNoProcessOf(second.id)).toEqual([]);
    await expectStatus(await c.call(t, `/api/deployments/${second.id}/promote`, { json: {} }), 200);
    const again = await answerOf(p.id, two.builtAt);
    expect(again.instance).not.toBe(two.instance);
    expect(again.env.GREETING).toBe("hello");
    expect(again.env.SECRET_CANARY).toBe(CANARY);
    expect(await redeployState(t, p.id)).toEqual({ needsRedeploy: false, changes: [] });

    // The snapshot's secret is encrypted: in no table, log line or response in the clear.
    const dump = await dumpAllTables(server);
    expect(dump).not.toContain(CANARY);
    expect(server.logs.join("\n")).not.toContain(CANARY);
    for (const path of [`/api/deployments/${first.id}`, `/api/deployments/${second.id}`, `/api/projects/${p.id}/deployments`, `/api/projects/${p.id}/env`]) {
      expect(await (await c.call(t, path)).text()).not.toContain(CANARY);
    }
  });

  it("a variable changed after queueing does not reach the build: the deployment builds and runs what it pinned", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [{ key: "GREETING", value: "queued" }]);
    // Queued, then changed before (or while) the runner builds it.
    const queued = await c.deploy(t, p.id);
    await c.setVars(t, p.id, [{ key: "GREETING", value: "changed later" }]);
    await ready(t, queued);
    const answer = await c.askApp((await c.currentPort(p.id))!);
    expect(answer.env.GREETING).toBe("queued");
    expect(await redeployState(t, p.id)).toEqual({ needsRedeploy: true, changes: ["variables"] });
  });
});
