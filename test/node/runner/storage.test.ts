/**
 * The runner's part of artifacts and storage caps (functions/deployments/artifacts.ts,
 * functions/self-hosted/work-dir-usage.ts), on Postgres with the runner on: repeated
 * deploy-and-cancel (queued or mid-build) leaves no artifact and no work directory
 * behind, so it never fills the disk nor the cap; a failed build's artifact goes with its
 * work directory, a pruned one's with its build; a ready deployment's work directory is
 * measured (du) and counted, and ORG_ARTIFACT_QUOTA_MB / ORG_WORKDIR_QUOTA_MB refuse with
 * the figures until a project is deleted.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { orgStorage } from "../../../functions/deployments/artifacts";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { measureDir } from "../../../functions/self-hosted/work-dir-usage";
import { deployments } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { describeBytes } from "../../../shared/storage/quotas";
import { folderClient } from "../../support/folder-client";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { appTarball, pushApp, useRunnerServer } from "../../support/runner-harness";

// 50 KiB of artifacts (two ~20 kB uploads, not three) and 1 MiB of kept builds (the fixture app's takes ~70 kB) per organization.
const server = useRunnerServer({ prefix: "runner_storage", env: { ORG_ARTIFACT_QUOTA_MB: "0.05", ORG_WORKDIR_QUOTA_MB: "1" } });
const c = runnerClient(
  () => server,
  () => server.git,
);
// The folder flow's client reads the server's upload store (the relay's disk).
Object.defineProperty(server, "uploadStore", { get: () => server.node.services.uploads, configurable: true });
const folder = folderClient(server);

/** Random text (incompressible enough): a tarball holding it is about `kb` × 0.75 kB larger. */
const noise = (kb: number) => randomBytes(kb * 768).toString("base64");

/** An upload project of the fixture app (plus `extra` files) through the API's folder flow: session, upload, scan, ensure. */
async function uploadProject(t: Member, extra: Record<string, string> = {}, vars: Array<{ key: string; value: string }> = []) {
  const bytes = await appTarball(extra);
  const { target } = await folder.uploadAndScan(t, bytes);
  const project = await expectBody(
    await folder.ensure(t, { name: `app ${newId("x").slice(-6)}`, uploadSessionId: target.sessionId }),
    201,
    EnsuredProjectSchema,
  );
  if (vars.length) await c.setVars(t, project.id, vars);
  return { project, sessionId: target.sessionId, bytes };
}

const deploy = (t: Member, projectId: string) => c.call(t, "/api/deployments", { json: { projectId } });
const artifactsOf = (orgId: string) => {
  const dir = join(server.dataDir, "uploads", "artifacts", orgId);
  return existsSync(dir) ? readdirSync(dir) : [];
};
const workDirs = () => (existsSync(join(server.dataDir, "deployments")) ? readdirSync(join(server.dataDir, "deployments")) : []);

/** Until the runner holds no job for the deployment (its failure/cancel branch has run). */
async function settled(id: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (server.node.runner!.active().includes(id)) {
    if (Date.now() > deadline) throw new Error(`deployment ${id} is still active`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("runner: artifacts and work directories", () => {
  it("repeated deploy-and-cancel, queued or mid-build, leaves no artifact and no work directory behind and never reaches the cap", {
    timeout: 120_000,
  }, async () => {
    const t = await seedTenant(server);
    // ~20 kB a deployment: ten of them would be 4× the organization's 50 KiB cap.
    const { project, bytes } = await uploadProject(t, { "noise.txt": noise(26) }, [{ key: "SLOW_BUILD", value: "1" }]);
    expect(bytes.length).toBeGreaterThan(18_000);
    const ids: string[] = [];
    for (let round = 0; round < 10; round++) {
      const d = await expectBody(await deploy(t, project.id), 201, DeploymentSchema);
      ids.push(d.id);
      // Odd rounds: canceled once the build runs (the runner's branch); even ones at once (queued, unless the runner was quicker).
      if (round % 2 === 1) await c.waitFor(t, d.id, ["building"]);
      expect((await expectBody(await c.call(t, `/api/deployments/${d.id}/cancel`, { json: {} }), 200, DeploymentSchema)).status).toBe("canceled");
      await settled(d.id);
      expect(artifactsOf(t.orgId)).toEqual([]);
      expect(workDirs()).not.toContain(d.id);
    }
    const rows = await server.db.select().from(deployments).where(eq(deployments.projectId, project.id));
    expect(rows.map((r) => r.status)).toEqual(ids.map(() => "canceled"));
    expect(rows.every((r) => r.artifactKey === null && r.artifactBytes === null && r.workDirBytes === null)).toBe(true);
    // Both paths were taken: some canceled mid-build (the runner removed them), some queued (the route did).
    const built = (await Promise.all(ids.map((id) => c.read(t, id)))).filter((d) => d.transitions.some((x) => x.status === "building"));
    expect(built.length).toBeGreaterThanOrEqual(5);
    expect(await orgStorage(server.db, t.orgId)).toEqual({ artifactBytes: 0, workDirBytes: 0 });
  });

  it("a failed build's artifact goes with its work directory", async () => {
    const t = await seedTenant(server);
    const { project } = await uploadProject(t, {}, [{ key: "FAIL_BUILD", value: "1" }]);
    const d = await expectBody(await deploy(t, project.id), 201, DeploymentSchema);
    expect(artifactsOf(t.orgId)).toEqual([`${d.id}.tar.gz`]);
    expect((await c.waitFor(t, d.id, ["failed", "ready"])).status).toBe("failed");
    await settled(d.id);
    expect(artifactsOf(t.orgId)).toEqual([]);
    expect(workDirs()).not.toContain(d.id);
    expect((await c.row(d.id)).artifactKey).toBeNull();
  });

  it("a pruned deployment's artifact goes with its build; ready ones keep theirs, with their work directory measured", { timeout: 120_000 }, async () => {
    const t = await seedTenant(server);
    const { project } = await uploadProject(t);
    const ids: string[] = [];
    // The current one and 3 superseded ones are kept: the 5th ready deployment prunes the 1st.
    for (let i = 0; i < 5; i++) {
      const d = await expectBody(await deploy(t, project.id), 201, DeploymentSchema);
      expect((await c.waitFor(t, d.id, ["ready", "failed"])).status).toBe("ready");
      await settled(d.id);
      ids.push(d.id);
    }
    const pruned = await c.read(t, ids[0]!);
    expect(pruned.prunedAt).not.toBeNull();
    expect(await c.row(ids[0]!)).toMatchObject({ artifactKey: null, artifactBytes: null, workDirBytes: null });
    expect(artifactsOf(t.orgId).sort()).toEqual(
      ids
        .slice(1)
        .map((id) => `${id}.tar.gz`)
        .sort(),
    );
    // Each kept build's size, as du measures it, is what the organization is charged.
    let charged = 0;
    for (const id of ids.slice(1)) {
      const r = await c.row(id);
      expect(r.workDirBytes).toBe(await measureDir(join(server.dataDir, "deployments", id)));
      expect(r.workDirBytes!).toBeGreaterThan(0);
      charged += r.workDirBytes!;
    }
    expect((await orgStorage(server.db, t.orgId)).workDirBytes).toBe(charged);
  });
});

describe("runner: storage caps", () => {
  it("ORG_ARTIFACT_QUOTA_MB: a third ~20 kB upload is refused with the figures; deleting a project makes room", { timeout: 90_000 }, async () => {
    const t = await seedTenant(server);
    const { project } = await uploadProject(t, { "noise.txt": noise(26) });
    const first = await expectBody(await deploy(t, project.id), 201, DeploymentSchema);
    const second = await expectBody(await deploy(t, project.id), 201, DeploymentSchema);
    for (const d of [first, second]) expect((await c.waitFor(t, d.id, ["ready", "failed"])).status).toBe("ready");
    const used = (await orgStorage(server.db, t.orgId)).artifactBytes;
    const size = (await c.row(second.id)).artifactBytes!;
    expect(used).toBe((await c.row(first.id)).artifactBytes! + size);

    const refused = await expectProblem(await deploy(t, project.id), 409);
    expect(refused.detail).toContain(
      `${describeBytes(used)} stored + ${describeBytes(size)} for this deployment > ${describeBytes(52_429)} (ORG_ARTIFACT_QUOTA_MB=0.05)`,
    );
    expect(artifactsOf(t.orgId)).toHaveLength(2);

    await expectStatus(await c.call(t, `/api/projects/${project.id}`, { method: "DELETE" }), 200);
    expect(artifactsOf(t.orgId)).toEqual([]);
    const again = await uploadProject(t, { "noise.txt": noise(26) });
    const d = await expectBody(await deploy(t, again.project.id), 201, DeploymentSchema);
    expect((await c.waitFor(t, d.id, ["ready", "failed"])).status).toBe("ready");
  });

  it("ORG_WORKDIR_QUOTA_MB: a build the runner measured at the cap refuses the next deployment (a git one: no artifact); deleting the project makes room", {
    timeout: 90_000,
  }, async () => {
    const t = await seedTenant(server);
    const { p, repo } = await c.gitProject(t);
    // ~1.4 MB of source: its work directory alone is past the 1 MiB cap.
    await pushApp(server.git, repo.owner, repo.repo, "trunk", { "noise.txt": noise(1400) });
    const d = await c.deploy(t, p.id);
    expect((await c.waitFor(t, d.id, ["ready", "failed"])).status).toBe("ready");
    const measured = (
      await until(
        () => c.row(d.id),
        (r) => r.workDirBytes !== null,
      )
    ).workDirBytes!;
    expect(measured).toBeGreaterThan(1024 * 1024);

    const refused = await expectProblem(await deploy(t, p.id), 409);
    expect(refused.detail).toContain(`${describeBytes(measured)} of ${describeBytes(1024 * 1024)} (ORG_WORKDIR_QUOTA_MB=1)`);

    await expectStatus(await c.call(t, `/api/projects/${p.id}`, { method: "DELETE" }), 200);
    const other = await c.gitProject(t);
    expect((await c.waitFor(t, (await c.deploy(t, other.p.id)).id, ["ready", "failed"])).status).toBe("ready");
  });
});
