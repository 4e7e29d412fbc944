/**
 * Transfer between a self-hosted instance (the Node adapter on PGlite) and the cloud
 * (the real Worker in workerd over HTTP on loopback, its own Postgres and keyring):
 * to-cloud then to-self-hosted with every field and secret equal at the end, an upload
 * project's tarball through the cloud's presigned flow, a local-folder project's snapshot
 * (ignored files left out) arriving as an upload project, a transfer whose cloud dies at a
 * step and is resumed, a domain conflict refused before anything moves, permissions,
 * scope and one transfer at a time. Every test has its own tenants on both sides.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { gunzipSync } from "node:zlib";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretContext } from "../../functions/projects/env-store";
import { readProjectExport } from "../../functions/projects/export-store";
import { HomePage } from "../../functions/projects/home";
import { transferMarker } from "../../functions/cloud/apply";
import {
  claimTransfer,
  endTransfer,
  LostLease,
  moveToCloud,
  recordStep,
  recordTarget,
  TRANSFER_LEASE_MS,
  touchTransfer,
} from "../../functions/cloud/transfer-store";
import { cloudProjects, deployments, environments, envVars, projects, projectTransfers } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import {
  canaries,
  cloudExport,
  killableRelay,
  linkedPair,
  localExport,
  openHookedInstance,
  richProject,
  tarFiles,
  transfer,
  transferOk,
} from "../support/cloud-transfer";
import { useCloudWorker } from "../support/cloud-worker";
import { folderClient, NEXT_APP } from "../support/folder-client";
import { dumpAllTables, expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../support/harness";
import { projectHelpers } from "../support/projects";
import { tgz } from "../support/tar-fixtures";
import { sessionCookieOf, withCookie } from "../suites/auth/session-client";

let sh: Awaited<ReturnType<typeof openHookedInstance>>;
/** The instance's LOCAL_ROOTS root (local-folder projects live under it). */
let localRoot: string;
beforeAll(async () => {
  localRoot = realpathSync(mkdtempSync(join(tmpdir(), "ws-transfer-root-")));
  sh = await openHookedInstance({ LOCAL_ROOTS: localRoot });
});
afterAll(async () => {
  await sh?.close();
  if (localRoot) rmSync(localRoot, { recursive: true, force: true });
});
const cloud = useCloudWorker();

const home = async (m: Member) => (await expectBody(await sh.request("/api/projects/home?limit=100", { token: m.token, org: m.orgId }), 200, HomePage)).items;
const localList = async (m: Member) =>
  (await expectStatus<{ items: Array<{ id: string }> }>(await sh.request("/api/projects?limit=100", { token: m.token, org: m.orgId }), 200)).items.map(
    (p) => p.id,
  );
const cloudProjectsNamed = async (orgId: string, name: string) =>
  cloud.db
    .select({ id: projects.id, disabledAt: projects.disabledAt })
    .from(projects)
    .where(and(eq(projects.orgId, orgId), eq(projects.name, name)));

const cloudProjectIds = async (orgId: string) => cloud.db.select({ id: projects.id }).from(projects).where(eq(projects.orgId, orgId));

/** A bundle without its id, its artifact link (per side) normalised. */
const comparable = (b: { id: string; source: { kind: string } }) => {
  const { id: _, source, ...rest } = b;
  return { ...rest, source: { kind: source.kind } };
};

function noCanaries(lines: string[], values: string[], side: string) {
  for (const v of values)
    expect(
      lines.filter((l) => l.includes(v)),
      `${side} logged a canary`,
    ).toEqual([]);
}

describe("to-cloud then to-self-hosted", () => {
  it("moves every field and secret, re-encrypted by the cloud, and brings the project back into its own row", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const c = canaries();
    const p = await richProject(sh, shOwner, c);
    const deployment = await projectHelpers(sh).addDeployment({ ...p, slug: "", status: "" } as never);
    const before = await localExport(sh, shOwner.orgId, p.id);
    expect(before.environments.map((e) => e.env.length)).toEqual([2, 2]);
    expect(before.services.find((s) => s.name === "db")?.environment?.POSTGRES_PASSWORD).toBe(c.service);
    expect(before.git?.autoDeploy).toBe(true);

    const t0 = performance.now();
    const moved = await transferOk(sh, shOwner, p.id, "to-cloud");
    const toCloudMs = performance.now() - t0;
    expect(moved).toMatchObject({ direction: "to-cloud", sourceId: p.id });
    const cloudId = moved.projectId;
    expect(cloudId).not.toBe(p.id);
    expect(moved.project?.id).toBe(cloudId);
    // Auto-deploy is on: the cloud made its own push hook, whose secret this answer shows once.
    expect(moved.pushHook?.url).toMatch(/\/api\/git\/hooks\//);
    expect(moved.pushHook?.url.startsWith(cloud.url)).toBe(true);
    const hookSecret = moved.pushHook!.secret;

    // The cloud's own bundle of its new project is the local one, field by field.
    const there = await cloudExport(cloud, cloudOwner, cloudId);
    expect(comparable(there)).toEqual(comparable(before));

    // Re-encrypted: the cloud's rows open with the cloud's keyring, not the instance's.
    const [prodEnv] = await cloud.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, cloudId), eq(environments.name, "production")));
    const [secretRow] = await cloud.db
      .select()
      .from(envVars)
      .where(and(eq(envVars.projectId, cloudId), eq(envVars.environmentId, prodEnv!.id), eq(envVars.key, "SECRET_TOKEN")));
    const ctx = secretContext({ orgId: cloudOwner.orgId, projectId: cloudId, environmentId: prodEnv!.id }, "SECRET_TOKEN");
    expect(await cloud.keyring.decrypt(secretRow!.valueCiphertext!, ctx)).toBe(c.secretProd);
    await expect(sh.keyring.decrypt(secretRow!.valueCiphertext!, ctx)).rejects.toThrow();
    const [cloudRow] = await cloud.db.select().from(projects).where(eq(projects.id, cloudId));
    const cloneCtx = { orgId: cloudOwner.orgId, table: "projects", column: "clone_token", rowId: cloudId };
    expect(await cloud.keyring.decrypt(cloudRow!.cloneTokenCiphertext!, cloneCtx)).toBe(c.cloneToken);

    // Here: gone from the list, once in the home feed (in the cloud), its id forwarded, its history kept.
    expect(await localList(shOwner)).not.toContain(p.id);
    const feed = await home(shOwner);
    expect(feed.filter((x) => x.id === cloudId || x.id === p.id || x.name === p.name).map((x) => [x.id, x.location])).toEqual([[cloudId, "cloud"]]);
    const forwarded = await sh.request(`/api/projects/${p.id}`, { token: shOwner.token, org: shOwner.orgId });
    expect(forwarded.headers.get("x-project-location")).toBe("cloud");
    expect((await expectStatus<{ id: string }>(forwarded, 200)).id).toBe(cloudId);
    expect(await sh.db.select({ id: deployments.id }).from(deployments).where(eq(deployments.projectId, p.id))).toEqual([{ id: deployment.id }]);
    const [stub] = await sh.db.select().from(projects).where(eq(projects.id, p.id));
    expect(stub).toMatchObject({ movedToCloud: cloudId, routingState: "offline" });
    expect(stub!.disabledAt).not.toBeNull();

    // Back, by the cloud id: the same local row, every field and secret as before.
    const t1 = performance.now();
    const back = await transferOk(sh, shOwner, cloudId, "to-self-hosted");
    const toSelfMs = performance.now() - t1;
    // The local row kept its own hook: nothing new to set up.
    expect(back).toMatchObject({ direction: "to-self-hosted", sourceId: cloudId, projectId: p.id, pushHook: null });
    const after = await localExport(sh, shOwner.orgId, p.id);
    expect(after).toEqual(before);
    const local = await sh.request(`/api/projects/${p.id}`, { token: shOwner.token, org: shOwner.orgId });
    expect(local.headers.get("x-project-location")).toBeNull();
    expect(await expectStatus<{ location: string; status: string }>(local, 200)).toMatchObject({ location: "self-hosted" });
    expect(await sh.db.select({ id: deployments.id }).from(deployments).where(eq(deployments.projectId, p.id))).toEqual([{ id: deployment.id }]);

    // The cloud project is disabled there, and the feed shows the project once, here.
    expect((await cloudExport(cloud, cloudOwner, cloudId)).disabled).toBe(true);
    const feedBack = await home(shOwner);
    expect(feedBack.filter((x) => x.id === cloudId || x.id === p.id || x.name === p.name).map((x) => [x.id, x.location])).toEqual([[p.id, "self-hosted"]]);
    expect(await localList(shOwner)).toContain(p.id);

    noCanaries(sh.logs, [...Object.values(c), hookSecret], "the instance");
    noCanaries(cloud.logs, [...Object.values(c), hookSecret], "the cloud");
    // Nor in either database in the clear (transfer rows, errors, anything).
    const [shRows, cloudRows] = [await dumpAllTables(sh), await dumpAllTables(cloud)];
    for (const v of Object.values(c)) {
      expect(shRows.includes(v), "the instance stores a canary in the clear").toBe(false);
      expect(cloudRows.includes(v), "the cloud stores a canary in the clear").toBe(false);
    }
    console.info(`transfer: to-cloud ${toCloudMs.toFixed(0)} ms, to-self-hosted ${toSelfMs.toFixed(0)} ms`);
  }, 60_000);

  it("to-self-hosted by the local id of the moved project, and to-cloud again reuses the cloud project", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const p = await richProject(sh, shOwner, canaries());
    const first = await transferOk(sh, shOwner, p.id, "to-cloud");
    await transferOk(sh, shOwner, p.id, "to-self-hosted");
    const again = await transferOk(sh, shOwner, p.id, "to-cloud");
    expect(again.projectId).toBe(first.projectId);
    expect((await cloudExport(cloud, cloudOwner, first.projectId)).disabled).toBe(false);
    expect(await cloudProjectsNamed(cloudOwner.orgId, p.name)).toHaveLength(1);
  }, 60_000);
});

describe("an upload project", () => {
  it("goes to the cloud through its presigned upload: the same tarball there", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const folders = folderClient(sh);
    const bytes = await tgz(NEXT_APP);
    const { target } = await folders.uploadAndScan(shOwner, bytes);
    const ensured = await expectStatus<{ id: string; name: string }>(
      await folders.ensure(shOwner, { name: `upload ${newId("n")}`, uploadSessionId: target.sessionId }),
      201,
    );
    const before = await localExport(sh, shOwner.orgId, ensured.id);
    expect(before.source.kind).toBe("upload");

    const moved = await transferOk(sh, shOwner, ensured.id, "to-cloud");
    const there = await cloudExport(cloud, cloudOwner, moved.projectId);
    expect(there.source.kind).toBe("upload");
    expect(there.source.artifact).not.toBeNull();
    const res = await fetch(there.source.artifact!.url);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
    expect(comparable(there)).toEqual(comparable(before));

    // And back: the tarball comes home through the instance's own relay flow.
    await transferOk(sh, shOwner, moved.projectId, "to-self-hosted");
    const after = await localExport(sh, shOwner.orgId, ensured.id);
    expect(after.source.kind).toBe("upload");
    const stored = await sh.uploadStore.open((await readProjectExport(sh.db, sh.keyring, shOwner.orgId, ensured.id)).latestArtifactKey!);
    expect(Buffer.from(await new Response(stored!.body).arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
  }, 60_000);
});

describe("a local-folder project", () => {
  it("goes to the cloud as an upload project: its folder snapshotted at transfer time, ignored files left out", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const canary = `canary-ignored-${newId("c")}`;
    const dir = join(localRoot, `app-${newId("d").toLowerCase()}`);
    const pkg = JSON.stringify({ name: "local-app", version: "1.0.0", scripts: { start: "node index.js" } });
    const index = 'require("http").createServer((_, res) => res.end("ok")).listen(process.env.PORT);\n';
    mkdirSync(join(dir, "ignored-dir"), { recursive: true });
    writeFileSync(join(dir, "package.json"), pkg);
    writeFileSync(join(dir, "index.js"), index);
    writeFileSync(join(dir, ".gitignore"), ".env.local\nignored-dir/\n");
    writeFileSync(join(dir, ".env.local"), `SECRET=${canary}\n`);
    writeFileSync(join(dir, "ignored-dir", "x.js"), `// ${canary}\n`);
    const imported = await expectStatus<{ id: string }>(
      await sh.request("/api/projects/import", { method: "POST", token: shOwner.token, org: shOwner.orgId, json: { path: dir } }),
      201,
    );
    const before = await localExport(sh, shOwner.orgId, imported.id);
    expect(before.source.kind).toBe("local");
    // Written after the import: the snapshot is taken when the transfer runs, not before.
    writeFileSync(join(dir, "late.js"), "module.exports = 1;\n");

    const moved = await transferOk(sh, shOwner, imported.id, "to-cloud");
    const there = await cloudExport(cloud, cloudOwner, moved.projectId);
    expect(there.source.kind).toBe("upload");
    expect(there.source.artifact).not.toBeNull();
    const { source: _, ...rest } = comparable(there);
    const { source: __, ...restBefore } = comparable(before);
    expect(rest).toEqual(restBefore);

    const res = await fetch(there.source.artifact!.url);
    expect(res.status).toBe(200);
    const gz = new Uint8Array(await res.arrayBuffer());
    const files = tarFiles(gz);
    expect(files.get("package.json")).toBe(pkg);
    expect(files.get("index.js")).toBe(index);
    expect(files.get("late.js")).toBe("module.exports = 1;\n");
    expect(files.has(".gitignore")).toBe(true);
    expect([...files.keys()].filter((name) => name.startsWith(".env.local") || name.startsWith("ignored-dir"))).toEqual([]);
    expect(Buffer.from(gunzipSync(gz)).includes(canary)).toBe(false);
    noCanaries(sh.logs, [canary], "the instance");
    // Here the project is now the cloud's stub (hidden from the instance's list).
    expect(await localList(shOwner)).not.toContain(imported.id);
  }, 60_000);
});

describe("a transfer whose cloud dies at a step", () => {
  it("answers 502 naming the step, leaves the project usable here, and finishes when run again", async () => {
    const relay = await killableRelay(cloud.url);
    try {
      const { shOwner, cloudOwner } = await linkedPair(sh, cloud, relay.url);
      const c = canaries();
      const p = await richProject(sh, shOwner, c);
      const before = await localExport(sh, shOwner.orgId, p.id);
      sh.hook.current = async (direction, step) => {
        if (direction === "to-cloud" && step === "env") await relay.kill();
      };
      const problem = await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 502);
      expect(problem).toMatchObject({ step: "env" });
      sh.hook.current = undefined;

      // Still here, not moved, unchanged.
      expect(await expectStatus<{ id: string }>(await sh.request(`/api/projects/${p.id}`, { token: shOwner.token, org: shOwner.orgId }), 200)).toMatchObject({
        id: p.id,
        location: "self-hosted",
      });
      expect(await localList(shOwner)).toContain(p.id);
      expect(await localExport(sh, shOwner.orgId, p.id)).toEqual(before);

      await relay.revive();
      const moved = await transferOk(sh, shOwner, p.id, "to-cloud");
      const named = await cloudProjectsNamed(cloudOwner.orgId, p.name);
      expect(named.map((r) => r.id)).toEqual([moved.projectId]);
      const there = await cloudExport(cloud, cloudOwner, moved.projectId);
      expect(comparable(there)).toEqual(comparable(before));
      noCanaries(sh.logs, Object.values(c), "the instance");
    } finally {
      sh.hook.current = undefined;
      await relay.kill();
    }
  }, 60_000);

  it("a run whose process died after the cloud made the project, before its id was recorded, finds it by the transfer's marker; a same-named project is never adopted or touched, and the copy keeps its name's slug", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const p = await richProject(sh, shOwner, canaries());
    const before = await localExport(sh, shOwner.orgId, p.id);
    sh.hook.current = async (direction, step) => {
      if (direction === "to-cloud" && step === "domains") throw new Error("process died");
    };
    try {
      const problem = await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 500);
      expect(problem).toMatchObject({ step: "domains" });
    } finally {
      sh.hook.current = undefined;
    }
    // The cloud made the target with the transfer's marker as its framework (the project step, not reached, sets the real one).
    const [row] = await sh.db.select().from(projectTransfers).where(eq(projectTransfers.sourceId, p.id));
    const marker = transferMarker(row!.id);
    const markedRows = () =>
      cloud.db
        .select({ id: projects.id })
        .from(projects)
        .where(and(eq(projects.orgId, cloudOwner.orgId), eq(projects.framework, marker)));
    expect((await markedRows()).map((r) => r.id)).toEqual([row!.targetId]);

    // Meanwhile another member makes a project of the same name in the cloud organization, with a variable of its own.
    const other = await cloud.seedMember(cloudOwner.orgId, "admin");
    const decoy = await expectStatus<{ id: string }>(
      await cloud.request("/api/projects", { token: other.token, org: other.orgId, json: { name: p.name } }),
      201,
    );
    await expectStatus(
      await cloud.request(`/api/projects/${decoy.id}/env`, {
        method: "PATCH",
        token: other.token,
        org: other.orgId,
        json: { environment: "production", upserts: [{ key: "THEIRS", value: "keep me", isSecret: false }] },
      }),
      200,
    );
    const decoyBefore = await cloudExport(cloud, cloudOwner, decoy.id);

    // What a process that died right after the cloud's create leaves: the row still running, its lease run out, no target recorded.
    const stale = new Date(Date.now() - TRANSFER_LEASE_MS - 1000);
    await sh.db.update(projectTransfers).set({ state: "running", step: "create", targetId: null, updatedAt: stale }).where(eq(projectTransfers.sourceId, p.id));
    const moved = await transferOk(sh, shOwner, p.id, "to-cloud");
    // Resumed into the marked project, renamed; the decoy is neither adopted nor changed.
    expect(moved.projectId).toBe(row!.targetId);
    expect(moved.project?.name).toBe(p.name);
    expect((await cloudProjectsNamed(cloudOwner.orgId, p.name)).map((r) => r.id).sort()).toEqual([decoy.id, moved.projectId].sort());
    expect(await markedRows()).toEqual([]);
    // The slug comes from the real name (it never follows a rename): the copy's free route is the project's own.
    const [copy] = await cloud.db.select({ slug: projects.slug }).from(projects).where(eq(projects.id, moved.projectId));
    expect(copy!.slug).not.toMatch(/transfer/);
    expect(comparable(await cloudExport(cloud, cloudOwner, moved.projectId))).toEqual(comparable(before));
    expect(await cloudExport(cloud, cloudOwner, decoy.id)).toEqual(decoyBefore);
  }, 60_000);

  it("a transfer's marker is a valid framework (it must pass the create body's check on either side)", () => {
    const marker = transferMarker(newId("trf"));
    expect(marker).toMatch(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/);
    expect(marker.length).toBeLessThanOrEqual(64);
  });

  it("a running transfer whose lease has not run out is not taken over (409)", async () => {
    const { shOwner } = await linkedPair(sh, cloud);
    const p = await projectHelpers(sh).create(shOwner);
    await sh.db.insert(projectTransfers).values({
      id: newId("trf"),
      orgId: shOwner.orgId,
      direction: "to-cloud",
      sourceId: p.id,
      step: "env",
      state: "running",
      startedAt: new Date(),
      updatedAt: new Date(Date.now() - TRANSFER_LEASE_MS / 2),
    });
    await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 409);
  });

  it("to-self-hosted killed at a step leaves the project the cloud's, and finishes when run again", async () => {
    const relay = await killableRelay(cloud.url);
    try {
      const { shOwner, cloudOwner } = await linkedPair(sh, cloud, relay.url);
      const c = canaries();
      const p = await richProject(sh, shOwner, c);
      const before = await localExport(sh, shOwner.orgId, p.id);
      const { projectId: cloudId } = await transferOk(sh, shOwner, p.id, "to-cloud");
      sh.hook.current = async (direction, step) => {
        if (direction === "to-self-hosted" && step === "finish") await relay.kill();
      };
      const problem = await expectProblem(await transfer(sh, shOwner, cloudId, "to-self-hosted"), 502);
      expect(problem).toMatchObject({ step: "finish" });
      sh.hook.current = undefined;
      await relay.revive();

      // Still the cloud's: enabled there, the local row a disabled stub, its id forwarded.
      expect((await cloudExport(cloud, cloudOwner, cloudId)).disabled).toBe(false);
      const [stub] = await sh.db.select().from(projects).where(eq(projects.id, p.id));
      expect(stub).toMatchObject({ movedToCloud: cloudId, routingState: "offline" });
      expect(stub!.disabledAt).not.toBeNull();
      const forwarded = await sh.request(`/api/projects/${p.id}`, { token: shOwner.token, org: shOwner.orgId });
      expect(forwarded.headers.get("x-project-location")).toBe("cloud");
      await forwarded.body?.cancel();

      const back = await transferOk(sh, shOwner, cloudId, "to-self-hosted");
      expect(back.projectId).toBe(p.id);
      expect(await localExport(sh, shOwner.orgId, p.id)).toEqual(before);
      expect((await cloudExport(cloud, cloudOwner, cloudId)).disabled).toBe(true);
      noCanaries(sh.logs, Object.values(c), "the instance");
    } finally {
      sh.hook.current = undefined;
      await relay.kill();
    }
  }, 60_000);
});

describe("a cloud project", () => {
  it("comes to this instance as a new project with every field and secret, and goes back into the same cloud project", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const c = canaries();
    const origin = await richProject(cloud, cloudOwner, c);
    const before = await cloudExport(cloud, cloudOwner, origin.id);
    // Unknown here until the home feed has listed it.
    await expectProblem(await transfer(sh, shOwner, origin.id, "to-self-hosted"), 404);
    expect((await home(shOwner)).map((x) => x.id)).toContain(origin.id);

    const back = await transferOk(sh, shOwner, origin.id, "to-self-hosted");
    expect(back.projectId).not.toBe(origin.id);
    expect(comparable(await localExport(sh, shOwner.orgId, back.projectId))).toEqual(comparable(before));
    expect((await home(shOwner)).filter((x) => x.name === origin.name).map((x) => [x.id, x.location])).toEqual([[back.projectId, "self-hosted"]]);
    await expectProblem(await sh.request(`/api/projects/${origin.id}`, { token: shOwner.token, org: shOwner.orgId }), 404);

    const again = await transferOk(sh, shOwner, back.projectId, "to-cloud");
    expect(again.projectId).toBe(origin.id);
    expect(comparable(await cloudExport(cloud, cloudOwner, origin.id))).toEqual(comparable(before));
    expect(await cloudProjectsNamed(cloudOwner.orgId, origin.name)).toHaveLength(1);
    noCanaries(sh.logs, Object.values(c), "the instance");
    noCanaries(cloud.logs, Object.values(c), "the cloud");
  }, 60_000);

  it("whose domain is taken here fails at step domains with 409, leaving no project here", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const origin = await richProject(cloud, cloudOwner, canaries());
    await home(shOwner);
    const holder = await projectHelpers(sh).create(shOwner);
    await expectStatus(
      await sh.request(`/api/projects/${holder.id}/connect`, { token: shOwner.token, org: shOwner.orgId, json: { domain: origin.domains[0] } }),
      200,
    );
    const localBefore = await localList(shOwner);
    const problem = await expectProblem(await transfer(sh, shOwner, origin.id, "to-self-hosted"), 409);
    expect(problem).toMatchObject({ step: "domains" });
    expect(await localList(shOwner)).toEqual(localBefore);
    expect(
      await sh.db
        .select({ id: projects.id })
        .from(projects)
        .where(and(eq(projects.orgId, shOwner.orgId), eq(projects.name, origin.name))),
    ).toEqual([]);
    expect((await cloudExport(cloud, cloudOwner, origin.id)).disabled).toBe(false);
    const forwarded = await sh.request(`/api/projects/${origin.id}`, { token: shOwner.token, org: shOwner.orgId });
    expect(forwarded.headers.get("x-project-location")).toBe("cloud");
    await forwarded.body?.cancel();
  }, 60_000);

  it("deleted in the cloud after a to-cloud: the project is back here and moves again into a new cloud project", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const p = await richProject(sh, shOwner, canaries());
    const first = await transferOk(sh, shOwner, p.id, "to-cloud");
    await expectStatus(await cloud.request(`/api/projects/${first.projectId}`, { method: "DELETE", token: cloudOwner.token, org: cloudOwner.orgId }), 200);
    // The instance learns it from the cloud's 404 and takes its project back (disabled, as it was left).
    const gone = await sh.request(`/api/projects/${p.id}`, { token: shOwner.token, org: shOwner.orgId });
    expect(gone.status).toBe(404);
    await gone.body?.cancel();
    expect(await localList(shOwner)).toContain(p.id);
    const again = await transferOk(sh, shOwner, p.id, "to-cloud");
    expect(again.projectId).not.toBe(first.projectId);
    expect(await cloudProjectsNamed(cloudOwner.orgId, p.name)).toHaveLength(1);
  }, 60_000);
});

describe("a domain taken in the cloud", () => {
  it("fails at step domains with 409 before anything moves", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const p = await richProject(sh, shOwner, canaries());
    const before = await localExport(sh, shOwner.orgId, p.id);
    // Another cloud organization holds the primary domain.
    const other = await cloud.seedTenant();
    const holder = await expectStatus<{ id: string }>(
      await cloud.request("/api/projects", { token: other.token, org: other.orgId, json: { name: "holder" } }),
      201,
    );
    await expectStatus(
      await cloud.request(`/api/projects/${holder.id}/connect`, { token: other.token, org: other.orgId, json: { domain: p.domains[1] } }),
      200,
    );
    const countBefore = (await cloudProjectIds(cloudOwner.orgId)).length;

    const problem = await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 409);
    expect(problem).toMatchObject({ step: "domains" });
    expect((await cloudProjectIds(cloudOwner.orgId)).length).toBe(countBefore);
    expect(await localExport(sh, shOwner.orgId, p.id)).toEqual(before);
    expect(await localList(shOwner)).toContain(p.id);
    const [row] = await sh.db.select({ movedToCloud: projects.movedToCloud, disabledAt: projects.disabledAt }).from(projects).where(eq(projects.id, p.id));
    expect(row).toEqual({ movedToCloud: null, disabledAt: null });
  }, 60_000);
});

describe("who may transfer, where, and how many at once", () => {
  it("a member is 403; an unlinked organization is 409; the cloud has no transfer routes", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const p = await projectHelpers(sh).create(shOwner);
    const member = await seedMember(sh, shOwner.orgId, "member");
    await expectProblem(await transfer(sh, member, p.id, "to-cloud"), 403);
    await expectProblem(await transfer(sh, member, p.id, "to-self-hosted"), 403);

    const cloudProject = await expectStatus<{ id: string }>(
      await cloud.request("/api/projects", { token: cloudOwner.token, org: cloudOwner.orgId, json: { name: "c" } }),
      201,
    );
    for (const direction of ["to-cloud", "to-self-hosted"]) {
      const res = await cloud.request(`/api/projects/${cloudProject.id}/transfer/${direction}`, {
        method: "POST",
        token: cloudOwner.token,
        org: cloudOwner.orgId,
      });
      expect(res.status).toBe(404);
      await res.body?.cancel();
    }

    const lone = await seedTenant(sh);
    const q = await projectHelpers(sh).create(lone);
    await expectProblem(await transfer(sh, lone, q.id, "to-cloud"), 409);
  }, 60_000);

  it("the console's session cookie transfers too: this instance's writes carry the cookie and its Origin", async () => {
    const { shOwner } = await linkedPair(sh, cloud);
    const p = await projectHelpers(sh).create(shOwner);
    const signIn = await sh.request("/api/auth/token", { json: { token: shOwner.token } });
    await expectStatus(signIn, 200);
    const cookie = sessionCookieOf(signIn);
    const there = await expectStatus<{ projectId: string }>(
      await sh.request(`/api/projects/${p.id}/transfer/to-cloud`, withCookie(cookie, { method: "POST", org: shOwner.orgId })),
      200,
    );
    // Back again: every write here (create steps on this instance) is made with the cookie.
    const back = await expectStatus<{ projectId: string }>(
      await sh.request(`/api/projects/${there.projectId}/transfer/to-self-hosted`, withCookie(cookie, { method: "POST", org: shOwner.orgId })),
      200,
    );
    expect(back.projectId).toBe(p.id);
    // Without the same-origin header, a cookie cannot start one (CSRF).
    await expectProblem(
      await sh.request(`/api/projects/${p.id}/transfer/to-cloud`, withCookie(cookie, { method: "POST", org: shOwner.orgId, origin: null })),
      403,
    );
  }, 60_000);

  it("a second transfer of the same project while one runs is 409", async () => {
    const { shOwner } = await linkedPair(sh, cloud);
    const p = await projectHelpers(sh).create(shOwner);
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let reached!: () => void;
    const atCreate = new Promise<void>((r) => {
      reached = r;
    });
    sh.hook.current = async (direction, step) => {
      if (direction === "to-cloud" && step === "create") {
        reached();
        await held;
      }
    };
    try {
      const first = transfer(sh, shOwner, p.id, "to-cloud");
      await atCreate;
      await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 409);
      release();
      await expectStatus(await first, 200);
    } finally {
      sh.hook.current = undefined;
      release();
    }
  }, 60_000);
});

describe("transfers in both directions at once", () => {
  it("a to-cloud of a project being brought back is 409, and the first finishes", async () => {
    const { shOwner } = await linkedPair(sh, cloud);
    const p = await projectHelpers(sh).create(shOwner);
    const { projectId: cloudId } = await transferOk(sh, shOwner, p.id, "to-cloud");
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let reached!: () => void;
    const atEnv = new Promise<void>((r) => {
      reached = r;
    });
    sh.hook.current = async (direction, step) => {
      if (direction === "to-self-hosted" && step === "env") {
        reached();
        await held;
      }
    };
    try {
      const first = transfer(sh, shOwner, cloudId, "to-self-hosted");
      await atEnv;
      // The local row is shown again while the copy is made: a to-cloud of it now would race the one running.
      await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 409);
      release();
      expect(await expectStatus<{ projectId: string }>(await first, 200)).toMatchObject({ projectId: p.id });
    } finally {
      sh.hook.current = undefined;
      release();
    }
    // Nothing left held: the project moves again.
    await transferOk(sh, shOwner, p.id, "to-cloud");
  }, 60_000);
});

describe("a run taken over (its lease ran out while it stalled)", () => {
  it("has every bookkeeping write refused, and cannot move the project", async () => {
    const owner = await seedTenant(sh);
    const p = await projectHelpers(sh).create(owner);
    const first = (await claimTransfer(sh.db, owner.orgId, "to-cloud", p.id, new Date()))!;
    expect(first.runId).toBeTruthy();
    await recordStep(sh.db, first, "env", new Date());
    // The first run stalls past its lease; a second run claims the transfer.
    await sh.db
      .update(projectTransfers)
      .set({ updatedAt: new Date(Date.now() - TRANSFER_LEASE_MS - 1000) })
      .where(eq(projectTransfers.id, first.id));
    const second = (await claimTransfer(sh.db, owner.orgId, "to-cloud", p.id, new Date()))!;
    expect(second.id).toBe(first.id);
    expect(second.runId).not.toBe(first.runId);
    const [held] = await sh.db.select().from(projectTransfers).where(eq(projectTransfers.id, first.id));

    // The first run wakes up: nothing it writes lands.
    await expect(recordStep(sh.db, first, "clone-token", new Date())).rejects.toBeInstanceOf(LostLease);
    await expect(recordTarget(sh.db, first, "prj_elsewhere", new Date())).rejects.toBeInstanceOf(LostLease);
    expect(await touchTransfer(sh.db, first, new Date(Date.now() + 5000))).toBe(false);
    await expect(moveToCloud(sh.db, first, owner.orgId, p.id, "prj_elsewhere", "x", new Date())).rejects.toBeInstanceOf(LostLease);
    await expect(endTransfer(sh.db, first, { state: "failed", error: "stale" }, new Date())).rejects.toBeInstanceOf(LostLease);
    expect((await sh.db.select().from(projectTransfers).where(eq(projectTransfers.id, first.id)))[0]).toEqual(held);
    const [local] = await sh.db.select({ movedToCloud: projects.movedToCloud, disabledAt: projects.disabledAt }).from(projects).where(eq(projects.id, p.id));
    expect(local).toEqual({ movedToCloud: null, disabledAt: null });
    expect(await sh.db.select().from(cloudProjects).where(eq(cloudProjects.orgId, owner.orgId))).toEqual([]);

    // The run holding it writes as before.
    await recordStep(sh.db, second, "env", new Date());
    expect(await touchTransfer(sh.db, second, new Date())).toBe(true);
    await endTransfer(sh.db, second, { state: "failed", error: "test" }, new Date());
  });

  it("stops at its next step with 409 naming it, the project not moved, the holder's row untouched; run again, the transfer finishes", async () => {
    const { shOwner, cloudOwner } = await linkedPair(sh, cloud);
    const p = await richProject(sh, shOwner, canaries());
    const before = await localExport(sh, shOwner.orgId, p.id);
    let taker: Awaited<ReturnType<typeof claimTransfer>>;
    sh.hook.current = async (direction, step) => {
      if (direction !== "to-cloud" || step !== "finish") return;
      // Here the run stalls past its lease and another claims the transfer.
      await sh.db
        .update(projectTransfers)
        .set({ updatedAt: new Date(Date.now() - TRANSFER_LEASE_MS - 1000) })
        .where(eq(projectTransfers.sourceId, p.id));
      taker = await claimTransfer(sh.db, shOwner.orgId, "to-cloud", p.id, new Date());
    };
    let held: typeof projectTransfers.$inferSelect | undefined;
    try {
      const problem = await expectProblem(await transfer(sh, shOwner, p.id, "to-cloud"), 409);
      expect(problem).toMatchObject({ step: "finish" });
      expect(problem.detail).toMatch(/taken over/);
      [held] = await sh.db.select().from(projectTransfers).where(eq(projectTransfers.sourceId, p.id));
    } finally {
      sh.hook.current = undefined;
    }
    // Not moved: the local project is shown and enabled here, unchanged; the cloud knows no copy of it.
    expect(await localList(shOwner)).toContain(p.id);
    const [local] = await sh.db.select({ movedToCloud: projects.movedToCloud, disabledAt: projects.disabledAt }).from(projects).where(eq(projects.id, p.id));
    expect(local).toEqual({ movedToCloud: null, disabledAt: null });
    expect(await localExport(sh, shOwner.orgId, p.id)).toEqual(before);
    expect(await sh.db.select().from(cloudProjects).where(eq(cloudProjects.orgId, shOwner.orgId))).toEqual([]);
    // The row is the taker's: running, its run id, not ended or failed by the stale run.
    expect(held).toMatchObject({ state: "running", runId: taker!.runId, error: null });

    // The taker's run ends (here: it fails); run again, the transfer resumes into the same cloud project.
    await endTransfer(sh.db, taker!, { state: "failed", error: "test" }, new Date());
    const moved = await transferOk(sh, shOwner, p.id, "to-cloud");
    expect(moved.projectId).toBe(held!.targetId);
    expect((await cloudProjectsNamed(cloudOwner.orgId, p.name)).map((r) => r.id)).toEqual([moved.projectId]);
    expect(comparable(await cloudExport(cloud, cloudOwner, moved.projectId))).toEqual(comparable(before));
  }, 60_000);
});
