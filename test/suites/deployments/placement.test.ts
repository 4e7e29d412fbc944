/**
 * Placement (issue 22, item 6) through POST /api/deployments and the reads:
 * the per-deploy choice over Settings, the default server, labels, and why a
 * deployment waits (`waitingFor`), recomputed on read. The suites' self-hosted
 * instances run no runner, so a deploy without a choice goes to a server there
 * as on the cloud.
 */
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { CreatedServerSchema, ServerSchema } from "../../../functions/servers/schema";
import { deployments } from "../../../shared/db/schema";
import { deploymentHelpers } from "../../support/deployments";
import { gitServerControl } from "../../support/git-control";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { GitSourceSchema } from "../../../functions/projects/schema";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const { queue, read, list } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));

async function gitProject(t: Member) {
  const p = await create(t);
  const repo = await control.createRepo();
  await expectBody(
    await call(t, `/${p.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
    200,
    GitSourceSchema,
  );
  return p;
}

const queued = async (t: Member, json: Record<string, unknown>) => expectBody(await queue(t, json), 201, DeploymentSchema);
const reread = async (t: Member, id: string) => expectBody(await read(t, id), 200, DeploymentSchema);
const register = async (t: Member, json: Record<string, unknown> = {}) =>
  expectBody(await h.request("/api/servers", { method: "POST", token: t.token, org: t.orgId, json: { name: "build", ...json } }), 201, CreatedServerSchema);
const heartbeat = async (token: string) => expectStatus(await h.request("/api/runner/heartbeat", { method: "POST", token, json: { version: "1.0.0" } }), 200);
const drain = async (t: Member, id: string) =>
  expectBody(await h.request(`/api/servers/${id}`, { method: "PATCH", token: t.token, org: t.orgId, json: { draining: true } }), 200, ServerSchema);
const remove = async (t: Member, id: string) => expectStatus(await h.request(`/api/servers/${id}`, { method: "DELETE", token: t.token, org: t.orgId }), 200);
const deployDefaults = async (t: Member, json: unknown) =>
  expectStatus(await h.request("/api/settings/deploy-defaults", { method: "PATCH", token: t.token, org: t.orgId, json }), 200);
const buildMode = async (t: Member, mode: string) =>
  expectStatus(await h.request("/api/settings/build-mode", { method: "PATCH", token: t.token, org: t.orgId, json: { buildMode: mode } }), 200);
const deploymentsOf = async (projectId: string) => h.db.select().from(deployments).where(eq(deployments.projectId, projectId));

describe("placement: resolved when queued", () => {
  it("the per-deploy choice wins over Settings: serverId, target server with labels, target local (self-hosted)", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const a = await register(t);
    const b = await register(t, { labels: ["gpu"] });
    await heartbeat(a.token);
    await heartbeat(b.token);
    await deployDefaults(t, { defaultDeployTarget: "server", defaultServerId: a.id });

    const onB = await queued(t, { projectId: p.id, serverId: b.id });
    expect(onB).toMatchObject({ status: "queued", placement: "server", serverId: b.id, serverLabels: [], waitingFor: null, waitingMessage: null });
    const byLabels = await queued(t, { projectId: p.id, target: "server", labels: ["gpu"] });
    expect(byLabels).toMatchObject({ placement: "server", serverId: null, serverLabels: ["gpu"], waitingFor: null });
    if (h.runtime !== "worker") {
      const local = await queued(t, { projectId: p.id, target: "local" });
      expect(local).toMatchObject({ placement: "local", serverId: null, waitingFor: null });
    }
    // Settings alone: the default server.
    expect(await queued(t, { projectId: p.id })).toMatchObject({ placement: "server", serverId: a.id, waitingFor: null });
  });

  it("buildMode local places locally on a self-hosted instance; the cloud sends it to a server anyway", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    await buildMode(t, "local");
    const d = await queued(t, { projectId: p.id });
    if (h.runtime === "worker") expect(d).toMatchObject({ placement: "server", waitingFor: "no_server" });
    else expect(d).toMatchObject({ placement: "local", waitingFor: null });
  });

  it("a deleted default server: queued, waiting with server_deleted and a sentence saying so", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    await heartbeat(s.token);
    await deployDefaults(t, { defaultDeployTarget: "server", defaultServerId: s.id });
    const before = await queued(t, { projectId: p.id });
    expect(before).toMatchObject({ serverId: s.id, waitingFor: null });
    await remove(t, s.id);
    // The queued one now waits for a server that is gone; a new deploy does too.
    expect(await reread(t, before.id)).toMatchObject({ status: "queued", waitingFor: "server_deleted" });
    const after = await queued(t, { projectId: p.id });
    expect(after).toMatchObject({ status: "queued", placement: "server", serverId: s.id, waitingFor: "server_deleted" });
    expect(after.waitingMessage).toMatch(/no longer exists/);
  });

  it("no server: no_server; registered but never heard from: all_offline", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const d = await queued(t, { projectId: p.id, target: "server" });
    expect(d).toMatchObject({ status: "queued", placement: "server", serverId: null, waitingFor: "no_server" });
    expect(d.waitingMessage).toMatch(/no build server/);
    await register(t);
    expect(await reread(t, d.id)).toMatchObject({ waitingFor: "all_offline" });
  });

  it("every online server draining: all_draining", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    for (const name of ["one", "two"]) {
      const s = await register(t, { name });
      await heartbeat(s.token);
      await drain(t, s.id);
    }
    expect(await queued(t, { projectId: p.id, target: "server" })).toMatchObject({ status: "queued", waitingFor: "all_draining" });
  });

  it("labels no online server carries: labels_unmatched", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t, { labels: ["cpu"] });
    await heartbeat(s.token);
    expect(await queued(t, { projectId: p.id, labels: ["gpu", "region=eu"] })).toMatchObject({
      status: "queued",
      placement: "server",
      serverLabels: ["gpu", "region=eu"],
      waitingFor: "labels_unmatched",
    });
  });

  it("a server's heartbeat clears waitingFor on the next read (one and the project's list)", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    await deployDefaults(t, { defaultDeployTarget: "server", defaultServerId: s.id });
    const d = await queued(t, { projectId: p.id });
    expect(d).toMatchObject({ serverId: s.id, waitingFor: "server_offline" });
    expect((await list(t, p)).items.map((x) => x.waitingFor)).toEqual(["server_offline"]);
    await heartbeat(s.token);
    expect(await reread(t, d.id)).toMatchObject({ status: "queued", waitingFor: null, waitingMessage: null });
    expect((await list(t, p)).items.map((x) => x.waitingFor)).toEqual([null]);
  });
});

describe("placement: refused choices (400 naming the field, nothing written)", () => {
  it("target local on the cloud names target", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    if (h.runtime !== "worker") return;
    await expectProblem(await queue(t, { projectId: p.id, target: "local" }), 400, "target");
    expect(await deploymentsOf(p.id)).toEqual([]);
  });

  it("another organization's server (or an unknown one) names serverId, and reads like an unknown id", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const p = await gitProject(t);
    const foreign = await register(other);
    await heartbeat(foreign.token);
    const a = await expectProblem(await queue(t, { projectId: p.id, serverId: foreign.id }), 400, "serverId");
    const b = await expectProblem(await queue(t, { projectId: p.id, serverId: "srv_unknown" }), 400, "serverId");
    expect(a.detail).toBe(b.detail);
    expect(await deploymentsOf(p.id)).toEqual([]);
  });

  it("bad input: unknown target, bad labels, serverId or labels with target local, labels with serverId", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    await expectProblem(await queue(t, { projectId: p.id, target: "elsewhere" }), 400, "target");
    await expectProblem(await queue(t, { projectId: p.id, labels: ["not a label"] }), 400, "labels.0");
    await expectProblem(await queue(t, { projectId: p.id, labels: "gpu" }), 400, "labels");
    await expectProblem(await queue(t, { projectId: p.id, serverId: "" }), 400, "serverId");
    await expectProblem(await queue(t, { projectId: p.id, serverId: s.id, labels: ["gpu"] }), 400, "labels");
    if (h.runtime !== "worker") {
      await expectProblem(await queue(t, { projectId: p.id, target: "local", serverId: s.id }), 400, "serverId");
      await expectProblem(await queue(t, { projectId: p.id, target: "local", labels: ["gpu"] }), 400, "labels");
    }
    expect(await deploymentsOf(p.id)).toEqual([]);
  });
});
