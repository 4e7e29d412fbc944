/**
 * Immutable deployments through the API (functions/deployments/config-snapshot.ts,
 * config-drift.ts): a deployment pins the environment's variables, the resources
 * and the options when queued; the project and each environment read
 * `needsRedeploy` with what changed while the live configuration differs from the
 * current deployment's snapshot, and not after a redeploy; a promote makes an older
 * snapshot current again. The snapshot's secrets are encrypted for the deployment
 * and never returned. Concurrent merges and queues leave every snapshot whole.
 * The runner's steps are played through the store (the real runner: test/node/runner/immutable.test.ts).
 */
import { eq, inArray } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { pinnedVariables } from "../../../functions/deployments/config-snapshot";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { GitSourceSchema, ProjectSchema } from "../../../functions/projects/schema";
import { deployments } from "../../../shared/db/schema";
import { deploymentHelpers } from "../../support/deployments";
import { gitServerControl } from "../../support/git-control";
import { storedIn, expectBody, expectStatus, type Member, seedTenant } from "../../support/harness";
import { EnvironmentPage, type Project, projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const { queue, act, runToReady, seedQueued } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));

const CANARY = "canary-pinned-secret-93e4b7";
const UP_TO_DATE = { needsRedeploy: false, changes: [] };

async function gitProject(t: Member): Promise<Project> {
  const p = await create(t);
  const repo = await control.createRepo();
  await expectBody(
    await call(t, `/${p.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
    200,
    GitSourceSchema,
  );
  return p;
}

/** Queues a deployment through the API and plays the runner's steps to ready (current). */
async function deploy(t: Member, p: Project, environment?: string) {
  const d = await expectBody(await queue(t, { projectId: p.id, environment }), 201, DeploymentSchema);
  await runToReady(d.id);
  return d;
}

const projectState = async (t: Member, p: Project) => {
  const view = await expectBody(await call(t, `/${p.id}`), 200, ProjectSchema);
  return { needsRedeploy: view.needsRedeploy, changes: view.changes };
};

const environmentStates = async (t: Member, p: Project) => {
  const page = await expectBody(await call(t, `/${p.id}/environments`), 200, EnvironmentPage);
  return Object.fromEntries(page.items.map((e) => [e.name, { needsRedeploy: e.needsRedeploy, changes: e.changes }]));
};

const setVars = async (t: Member, p: Project, json: Record<string, unknown>) => expectStatus(await call(t, `/${p.id}/env`, { method: "PATCH", json }), 200);
const setResources = async (t: Member, p: Project, json: Record<string, unknown>) =>
  expectStatus(await call(t, `/${p.id}/resources`, { method: "PATCH", json }), 200);
const setOptions = async (t: Member, p: Project, json: Record<string, unknown>) =>
  expectStatus(await call(t, `/${p.id}/options`, { method: "POST", json }), 200);

describe("deployments: needsRedeploy", () => {
  it("flips on a variable, a resources and an options change, and back after a redeploy", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    // Nothing deployed: nothing runs an older configuration.
    await setVars(t, p, { upserts: [{ key: "A", value: "1" }] });
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
    await deploy(t, p);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);

    await setVars(t, p, { upserts: [{ key: "A", value: "2" }] });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables"] });
    expect((await environmentStates(t, p)).production).toEqual({ needsRedeploy: true, changes: ["variables"] });
    await deploy(t, p);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
    expect((await environmentStates(t, p)).production).toEqual(UP_TO_DATE);
    // The same value saved again changes nothing.
    await setVars(t, p, { upserts: [{ key: "A", value: "2" }] });
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);

    // Secrets: a new one, the same value again, the mask sent back, a new value, a deletion.
    await setVars(t, p, { upserts: [{ key: "S", value: CANARY, isSecret: true }] });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables"] });
    await deploy(t, p);
    await setVars(t, p, { upserts: [{ key: "S", value: CANARY }] });
    await setVars(t, p, { upserts: [{ key: "S", value: "••••••••" }] });
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
    await setVars(t, p, { upserts: [{ key: "S", value: `${CANARY}-2` }] });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables"] });
    await deploy(t, p);
    await setVars(t, p, { deletes: ["A"] });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables"] });
    await deploy(t, p);

    // Resources: what confines the build and the app; the sleep mode applies at once and is not pinned.
    await setResources(t, p, { sleepMode: "always_on" });
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
    await setResources(t, p, { production: { memoryMb: 1024 } });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["resources"] });
    await deploy(t, p);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);

    // Options: commands and directories; a null for an option never set changes nothing.
    await setOptions(t, p, { outputDirectory: null });
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
    await setOptions(t, p, { startCommand: "node server.js" });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["options"] });
    const pinned = await deploy(t, p);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);

    // Everything at once, in a fixed order.
    await setOptions(t, p, { startCommand: null, buildCommand: "npm run build" });
    await setResources(t, p, { build: { cpuCores: 1.5 }, diskGb: 20 });
    await setVars(t, p, { upserts: [{ key: "B", value: "x" }] });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables", "resources", "options"] });
    const latest = await deploy(t, p);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);

    // A promote runs the older snapshot: the live configuration is newer again; promoting the newest clears it.
    await expectStatus(await act(t, pinned.id, "promote"), 200);
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables", "resources", "options"] });
    await expectStatus(await act(t, latest.id, "promote"), 200);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
  });

  it("is per environment; the project reads any environment's", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "trunk" } }), 201);
    await deploy(t, p);
    await deploy(t, p, "staging");
    await setVars(t, p, { environment: "staging", upserts: [{ key: "ONLY_STAGING", value: "1" }] });
    expect(await environmentStates(t, p)).toEqual({ production: UP_TO_DATE, staging: { needsRedeploy: true, changes: ["variables"] } });
    expect(await projectState(t, p)).toEqual({ needsRedeploy: true, changes: ["variables"] });
    // Resources are the project's: every environment's current deployment is older.
    await setResources(t, p, { port: 8080 });
    expect(await environmentStates(t, p)).toEqual({
      production: { needsRedeploy: true, changes: ["resources"] },
      staging: { needsRedeploy: true, changes: ["variables", "resources"] },
    });
    await deploy(t, p, "staging");
    expect(await environmentStates(t, p)).toEqual({ production: { needsRedeploy: true, changes: ["resources"] }, staging: UP_TO_DATE });
    await deploy(t, p);
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
  });

  it("a deployment shows the resources and options it pinned; one queued before snapshots has none and runs the live configuration", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    await setResources(t, p, { production: { cpuCores: 0.5, memoryMb: 256 }, port: 4000 });
    await setOptions(t, p, { installCommand: "npm ci", rootDirectory: "app" });
    const d = await deploy(t, p);
    const read = await expectBody(await h.request(`/api/deployments/${d.id}`, { token: t.token, org: t.orgId }), 200, DeploymentSchema);
    expect(read.config).toEqual({
      resources: { production: { cpuCores: 0.5, memoryMb: 256 }, build: { cpuCores: 2, memoryMb: 2048 }, diskGb: 10, port: 4000 },
      options: {
        rootDirectory: "app",
        installCommand: "npm ci",
        buildCommand: null,
        startCommand: null,
        outputDirectory: null,
        runtimeVersion: null,
        healthCheckPath: null,
      },
    });
    await setOptions(t, p, { installCommand: "npm install" });
    expect((await expectBody(await h.request(`/api/deployments/${d.id}`, { token: t.token, org: t.orgId }), 200, DeploymentSchema)).config).toEqual(
      read.config,
    );

    // A row without a snapshot (as written before the migration) is never older than the live configuration.
    const legacy = await seedQueued(p);
    await runToReady(legacy.id);
    const legacyRead = await expectBody(await h.request(`/api/deployments/${legacy.id}`, { token: t.token, org: t.orgId }), 200, DeploymentSchema);
    expect(legacyRead.config).toBeNull();
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
  });

  it("the snapshot's secrets are encrypted for the deployment: no route returns them, no table holds them in the clear", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    await setVars(t, p, {
      upserts: [
        { key: "SECRET_CANARY", value: CANARY, isSecret: true },
        { key: "PLAIN", value: "shown" },
      ],
    });
    const d = await deploy(t, p);
    const other = await deploy(t, p);
    const bodies: string[] = [];
    for (const path of [
      `/api/projects/${p.id}`,
      `/api/projects/${p.id}/environments`,
      `/api/projects/${p.id}/env`,
      `/api/projects/${p.id}/info`,
      `/api/projects/${p.id}/deployments`,
      `/api/projects`,
      `/api/deployments/${d.id}`,
    ]) {
      const res = await h.request(path, { token: t.token, org: t.orgId });
      expect(res.status, path).toBe(200);
      bodies.push(await res.text());
    }
    await expectStatus(await act(t, d.id, "promote"), 200);
    bodies.push(await (await h.request(`/api/deployments/${d.id}`, { token: t.token, org: t.orgId })).text());
    for (const body of bodies) expect(body).not.toContain(CANARY);
    expect(await storedIn(h, CANARY)).toEqual([]);
    expect(h.logs.join("\n")).not.toContain(CANARY);

    // Decrypted for the runner, the snapshot holds the value; its ciphertext is bound to its deployment.
    const [row, otherRow] = await Promise.all([d.id, other.id].map(async (id) => (await h.db.select().from(deployments).where(eq(deployments.id, id)))[0]!));
    expect(await pinnedVariables(h.keyring, row!)).toEqual([
      { key: "PLAIN", value: "shown", isSecret: false },
      { key: "SECRET_CANARY", value: CANARY, isSecret: true },
    ]);
    await expect(pinnedVariables(h.keyring, { ...otherRow!, envSnapshotCiphertext: row!.envSnapshotCiphertext })).rejects.toThrow();
  });

  it.runIf(h.realConcurrency)("concurrent merges and deploys: every snapshot is one whole state of the variables", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    await setVars(t, p, {
      upserts: [
        { key: "A", value: "0" },
        { key: "B", value: "0" },
        { key: "S", value: "0", isSecret: true },
      ],
    });
    const rounds = 8;
    const queued: string[] = [];
    await Promise.all([
      ...Array.from({ length: rounds }, (_, i) =>
        setVars(t, p, {
          upserts: [
            { key: "A", value: String(i + 1) },
            { key: "B", value: String(i + 1) },
            { key: "S", value: String(i + 1) },
          ],
        }),
      ),
      ...Array.from({ length: rounds }, async () => {
        queued.push((await expectBody(await queue(t, { projectId: p.id }), 201, DeploymentSchema)).id);
      }),
    ]);
    const rows = await h.db.select().from(deployments).where(inArray(deployments.id, queued));
    expect(rows).toHaveLength(rounds);
    const digestOf = new Map<string, string>();
    for (const row of rows) {
      const vars = Object.fromEntries((await pinnedVariables(h.keyring, row))!.map((v) => [v.key, v.value]));
      // One merge is wholly in a snapshot or wholly out of it.
      expect(vars.A).toBe(vars.B);
      expect(vars.S).toBe(vars.A);
      // The digest was taken from the same state as the variables: equal states, equal digests, and only those.
      const digest = row.configSnapshot!.variablesDigest;
      if (digestOf.has(vars.A!)) expect(digest).toBe(digestOf.get(vars.A!));
      for (const [state, other] of digestOf) if (state !== vars.A) expect(digest).not.toBe(other);
      digestOf.set(vars.A!, digest);
    }
    // After the writers, a redeploy takes the final state and nothing is pending.
    const last = await deploy(t, p);
    const [lastRow] = await h.db.select().from(deployments).where(eq(deployments.id, last.id));
    const live = await expectStatus<{ items: Array<{ key: string; value: string }> }>(await call(t, `/${p.id}/env`), 200);
    const final = live.items.find((v) => v.key === "A")!.value;
    expect(Object.fromEntries((await pinnedVariables(h.keyring, lastRow!))!.map((v) => [v.key, v.value]))).toEqual({ A: final, B: final, S: final });
    expect(await projectState(t, p)).toEqual(UP_TO_DATE);
  });
});
