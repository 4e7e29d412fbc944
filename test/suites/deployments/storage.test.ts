/**
 * Deployment artifacts and the organizations' storage caps (functions/deployments/artifacts.ts),
 * on every runtime: a canceled queued deployment's artifact is removed at once, a failed or
 * pruned one's by the upload sweep; a redeploy copies the last folder from a deployment that
 * still holds it, never an older folder; ORG_ARTIFACT_QUOTA_MB and ORG_WORKDIR_QUOTA_MB refuse
 * with 409 naming the setting and the figures, and accept again once space is freed; concurrent
 * deployments never fit beyond the artifact cap. The runner's part (failure, cancel during a
 * build, prune, the measured work directory): test/node/runner/storage.test.ts.
 */
import { and, eq, sql } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { z } from "@hono/zod-openapi";
import { recordWorkDirBytes } from "../../../functions/deployments/artifacts";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { markStatus } from "../../../functions/deployments/store";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { GitSourceSchema } from "../../../functions/projects/schema";
import { deployments, uploadSessions } from "../../../shared/db/schema";
import { DEFAULT_QUOTA_MB, describeBytes, MIB, storageQuotasFromEnv } from "../../../shared/storage/quotas";
import type { UploadStorage } from "../../../shared/storage/types";
import { deploymentHelpers } from "../../support/deployments";
import { folderClient } from "../../support/folder-client";
import { gitServerControl } from "../../support/git-control";
import { expectBody, expectProblem, type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { tgz } from "../../support/tar-fixtures";

const ARTIFACT_CAP_MB = "0.25";
const WORKDIR_CAP_MB = "1";
const h = useRuntimeHarness({ env: { ORG_ARTIFACT_QUOTA_MB: ARTIFACT_CAP_MB, ORG_WORKDIR_QUOTA_MB: WORKDIR_CAP_MB } });
const c = folderClient(h);
const { create, call } = projectHelpers(h);
const { queue, act, runToReady } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));

const ARTIFACT_CAP = 0.25 * MIB;
const BuildAccess = z.object({ deployment: DeploymentSchema }).passthrough();

/** A Node app folder with `size` random (incompressible) bytes, so its tarball is about that large. */
function folder(size: number) {
  const blob = new Uint8Array(size);
  for (let i = 0; i < size; i += 65_536) crypto.getRandomValues(blob.subarray(i, Math.min(size, i + 65_536)));
  return {
    "package.json": JSON.stringify({ name: "web", scripts: { start: "node server.js" } }),
    "server.js": "require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT)\n",
    "blob.bin": blob,
  };
}

/** session → upload → scan → ensure: a new project, or a new folder of `projectId`. */
async function ensured(t: Member, size = 100_000, projectId?: string) {
  const bytes = await tgz(folder(size));
  const { target } = await c.uploadAndScan(t, bytes);
  const body = {
    name: projectId ? `v2 ${target.sessionId}` : `app ${target.sessionId}`,
    uploadSessionId: target.sessionId,
    ...(projectId ? { projectId } : {}),
  };
  const project = await expectBody(await c.ensure(t, body), projectId ? 200 : 201, EnsuredProjectSchema);
  return { bytes, sessionId: target.sessionId, project };
}

const access = async (t: Member, projectId: string, uploadSessionId: string) =>
  (await expectBody(await h.request("/api/deployments/build/access", { token: t.token, org: t.orgId, json: { projectId, uploadSessionId } }), 201, BuildAccess))
    .deployment;
const redeploy = async (t: Member, projectId: string) => expectBody(await queue(t, { projectId }), 201, DeploymentSchema);
const row = async (id: string) => (await h.db.select().from(deployments).where(eq(deployments.id, id)))[0]!;
const store = () => c.store() as UploadStorage;
const expire = (sessionId: string) =>
  h.db
    .update(uploadSessions)
    .set({ expiresAt: new Date(Date.now() - 1000) })
    .where(eq(uploadSessions.id, sessionId));
/** The deployment ended (or was pruned) longer ago than the sweep's grace. */
const endedLongAgo = (id: string, what: "finishedAt" | "prunedAt") =>
  h.db
    .update(deployments)
    .set({ [what]: new Date(Date.now() - 20 * 60_000) })
    .where(eq(deployments.id, id));

/** Files under the organization's artifact folder (the Node adapter's disk store; null on the bucket, which this client cannot list). */
async function artifactFiles(orgId: string): Promise<string[] | null> {
  const s = store() as UploadStorage & { dir?: string };
  if (!s.dir) return null;
  const { readdir } = await import("node:fs/promises");
  return (await readdir(`${s.dir}/artifacts/${orgId}`).catch(() => [] as string[])).sort();
}

async function storedBytes(orgId: string): Promise<number> {
  const [r] = await h.db
    .select({ n: sql<string>`coalesce(sum(${deployments.artifactBytes}), 0)` })
    .from(deployments)
    .where(and(eq(deployments.orgId, orgId), sql`${deployments.artifactKey} is not null`));
  return Number(r!.n);
}

describe("deployments: artifacts are kept only while they can be used", () => {
  it("a canceled queued deployment's artifact is removed at once; a redeploy copies the folder from a deployment that still holds it", async () => {
    const t = await seedTenant(h);
    const { bytes, sessionId, project } = await ensured(t);
    const first = await access(t, project.id, sessionId);
    expect((await row(first.id)).artifactBytes).toBe(bytes.length);
    await runToReady(first.id);

    const second = await redeploy(t, project.id);
    const secondKey = (await row(second.id)).artifactKey!;
    expect(await store().size(secondKey)).toBe(bytes.length);
    // Another organization's cancel is the usual 404 and removes nothing.
    await expectProblem(await act(await seedTenant(h), second.id, "cancel"), 404);
    expect(await store().size(secondKey)).toBe(bytes.length);
    expect((await expectBody(await act(t, second.id, "cancel"), 200, DeploymentSchema)).status).toBe("canceled");
    expect(await store().size(secondKey)).toBeNull();
    expect(await row(second.id)).toMatchObject({ artifactKey: null, artifactBytes: null });
    // The ready one keeps its artifact: it can be promoted, and a redeploy copies it.
    expect(await store().size((await row(first.id)).artifactKey!)).toBe(bytes.length);

    // The session is gone: the redeploy copies the folder from the ready deployment (the newest, canceled, holds none).
    await expire(sessionId);
    const third = await redeploy(t, project.id);
    expect(third.uploadSessionId).toBe(sessionId);
    expect(await store().size((await row(third.id)).artifactKey!)).toBe(bytes.length);
    await expectBody(await act(t, third.id, "cancel"), 200, DeploymentSchema);
    expect((await redeploy(t, project.id)).uploadSessionId).toBe(sessionId);
    const files = await artifactFiles(t.orgId);
    if (files) expect(files).toHaveLength(2);
  });

  it("the sweep removes a failed or pruned deployment's artifact after the grace, keeps a ready one's; a redeploy never falls back to an older folder", async () => {
    const t = await seedTenant(h);
    const v1 = await ensured(t);
    const d1 = await access(t, v1.project.id, v1.sessionId);
    await runToReady(d1.id);
    // A second folder of the same project, whose build fails.
    const v2 = await ensured(t, 100_000, v1.project.id);
    const d2 = await access(t, v1.project.id, v2.sessionId);
    const [key1, key2] = [(await row(d1.id)).artifactKey!, (await row(d2.id)).artifactKey!];
    await markStatus(h.db, d2.id, "building", new Date());
    await markStatus(h.db, d2.id, "failed", new Date(), "build failed");

    // Within the grace (a runner may still be reading it): kept.
    await c.sweep(new Date());
    expect(await store().size(key2)).toBe(v2.bytes.length);
    await endedLongAgo(d2.id, "finishedAt");
    await c.sweep(new Date());
    expect(await store().size(key2)).toBeNull();
    expect(await row(d2.id)).toMatchObject({ artifactKey: null, artifactBytes: null });
    expect(await store().size(key1)).toBe(v1.bytes.length);

    // The last folder (v2) is no longer stored: 409, not a deployment of v1.
    await expire(v1.sessionId);
    await expire(v2.sessionId);
    expect((await expectProblem(await queue(t, { projectId: v1.project.id }), 409)).detail).toMatch(/last uploaded folder is no longer stored/);

    // Pruned (its build removed, it can no longer be promoted): swept too.
    await endedLongAgo(d1.id, "prunedAt");
    await c.sweep(new Date());
    expect(await store().size(key1)).toBeNull();
    expect(await storedBytes(t.orgId)).toBe(0);
  });
});

describe("deployments: storage caps per organization", () => {
  it("past ORG_ARTIFACT_QUOTA_MB a deployment is 409 with the figures and nothing is stored; a cancel frees room", async () => {
    const t = await seedTenant(h);
    const { bytes, sessionId, project } = await ensured(t);
    const size = bytes.length;
    const first = await access(t, project.id, sessionId);
    const second = await redeploy(t, project.id);
    expect(await storedBytes(t.orgId)).toBe(2 * size);

    const refused = await expectProblem(await queue(t, { projectId: project.id }), 409);
    expect(refused.detail).toContain("ORG_ARTIFACT_QUOTA_MB=0.25");
    expect(refused.detail).toContain(`${describeBytes(2 * size)} stored + ${describeBytes(size)} for this deployment > ${describeBytes(ARTIFACT_CAP)}`);
    const viaAccess = await expectProblem(
      await h.request("/api/deployments/build/access", { token: t.token, org: t.orgId, json: { projectId: project.id, uploadSessionId: sessionId } }),
      409,
    );
    expect(viaAccess.detail).toContain("ORG_ARTIFACT_QUOTA_MB");
    expect(await h.db.select({ id: deployments.id }).from(deployments).where(eq(deployments.projectId, project.id))).toHaveLength(2);
    const files = await artifactFiles(t.orgId);
    if (files) expect(files).toEqual([`${first.id}.tar.gz`, `${second.id}.tar.gz`].sort());

    // Another organization is not held back by this one's usage.
    const other = await seedTenant(h);
    const theirs = await ensured(other);
    await access(other, theirs.project.id, theirs.sessionId);

    await expectBody(await act(t, second.id, "cancel"), 200, DeploymentSchema);
    expect(await storedBytes(t.orgId)).toBe(size);
    await redeploy(t, project.id);
  });

  it("while the kept builds are at ORG_WORKDIR_QUOTA_MB every deployment is 409 (git too); a pruned build frees room", async () => {
    const t = await seedTenant(h);
    const { sessionId, project } = await ensured(t, 1000);
    const d = await access(t, project.id, sessionId);
    await runToReady(d.id);
    await recordWorkDirBytes(h.db, d.id, MIB);

    const refused = await expectProblem(await queue(t, { projectId: project.id }), 409);
    expect(refused.detail).toContain(`${describeBytes(MIB)} of ${describeBytes(MIB)} (ORG_WORKDIR_QUOTA_MB=1)`);
    const git = await create(t);
    const repo = await control.createRepo();
    await expectBody(
      await call(t, `/${git.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
      200,
      GitSourceSchema,
    );
    expect((await expectProblem(await queue(t, { projectId: git.id }), 409)).detail).toContain("ORG_WORKDIR_QUOTA_MB");

    // The runner prunes the build (and clears its figure): room again.
    await h.db.update(deployments).set({ prunedAt: new Date() }).where(eq(deployments.id, d.id));
    await expectBody(await queue(t, { projectId: git.id }), 201, DeploymentSchema);
    // A measurement of a deployment that is not (or no longer) a kept build counts nothing.
    await recordWorkDirBytes(h.db, d.id, 50 * MIB);
    await redeploy(t, project.id);
  });

  it("concurrent deployments never fit beyond the artifact cap; refused copies are removed", async () => {
    const t = await seedTenant(h);
    const { bytes, project } = await ensured(t);
    const answers = await Promise.all(Array.from({ length: 6 }, () => queue(t, { projectId: project.id })));
    const statuses = answers.map((r) => r.status).sort();
    for (const r of answers) await r.body?.cancel();
    // 0.25 MiB holds two artifacts of ~100 kB, not three.
    expect(statuses).toEqual([201, 201, 409, 409, 409, 409]);
    expect(await storedBytes(t.orgId)).toBe(2 * bytes.length);
    expect(await storedBytes(t.orgId)).toBeLessThanOrEqual(ARTIFACT_CAP);
    const files = await artifactFiles(t.orgId);
    if (files) expect(files).toHaveLength(2);
  });

  it("the settings: MB (MiB) with decimals, 0 for no cap, defaults when unset, a malformed value named; the OpenAPI document states the defaults", async () => {
    expect(storageQuotasFromEnv({})).toEqual({ artifactBytes: DEFAULT_QUOTA_MB.artifacts * MIB, workDirBytes: DEFAULT_QUOTA_MB.workDirs * MIB });
    expect(storageQuotasFromEnv({ ORG_ARTIFACT_QUOTA_MB: "0.5", ORG_WORKDIR_QUOTA_MB: "0" })).toEqual({ artifactBytes: MIB / 2, workDirBytes: 0 });
    expect(() => storageQuotasFromEnv({ ORG_ARTIFACT_QUOTA_MB: "5G" })).toThrow(/Invalid configuration ORG_ARTIFACT_QUOTA_MB/);
    expect(() => storageQuotasFromEnv({ ORG_WORKDIR_QUOTA_MB: "-1" })).toThrow(/Invalid configuration ORG_WORKDIR_QUOTA_MB/);
    const doc = await expectBody(await h.request("/api/openapi.json"), 200, z.object({ paths: z.record(z.string(), z.any()) }).passthrough());
    for (const path of ["/api/deployments", "/api/deployments/build/access"]) {
      const description = doc.paths[path].post.description as string;
      expect(description).toContain(`ORG_ARTIFACT_QUOTA_MB\`, default ${DEFAULT_QUOTA_MB.artifacts} MB`);
      expect(description).toContain(`ORG_WORKDIR_QUOTA_MB\`, default ${DEFAULT_QUOTA_MB.workDirs} MB`);
    }
  });
});
