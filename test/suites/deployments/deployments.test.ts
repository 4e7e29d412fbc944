/**
 * The deployments API (functions/deployments/): queue from git against the run's
 * real git host, environments, no source, disabled, cancel, promote and `current`,
 * the project list's filters and transitions, the session token, org scoping.
 * The runner does not exist yet: its steps are played through the store.
 */
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { markReady, markStatus } from "../../../functions/deployments/store";
import { EnvironmentSchema } from "../../../functions/projects/environments";
import { GitSourceSchema, ProjectSchema } from "../../../functions/projects/schema";
import { deployments, uploadSessions } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { deploymentHelpers } from "../../support/deployments";
import { gitServerControl } from "../../support/git-control";
import { expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);
const { queue, read, act, list, seedQueued, runToReady } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));

/** A project linked to a fresh repository on the test host (default branch `trunk`). */
async function gitProject(t: Member) {
  const p = await create(t);
  const repo = await control.createRepo();
  await expectBody(
    await call(t, `/${p.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
    200,
    GitSourceSchema,
  );
  return { p, repo };
}

const queued = async (t: Member, json: Record<string, unknown>) => expectBody(await queue(t, json), 201, DeploymentSchema);

describe("deployments: create", () => {
  it("queues the deploy branch's head, resolved on the host now, and records the queued transition", async () => {
    const t = await seedTenant(h);
    const { p, repo } = await gitProject(t);
    const head = await control.addCommit(repo.owner, repo.repo, "trunk", "second");
    expect(head).toBe(await control.revParse(repo.owner, repo.repo, "trunk"));
    const before = Date.now();
    const d = await queued(t, { projectId: p.id });
    expect(d).toMatchObject({
      projectId: p.id,
      environment: "production",
      status: "queued",
      current: false,
      source: "git",
      gitProvider: "gitea",
      gitOwner: repo.owner,
      gitRepo: repo.repo,
      branch: "trunk",
      commitSha: head,
      uploadSessionId: null,
      failureReason: null,
      createdBy: t.userId,
      finishedAt: null,
    });
    expect(d.transitions).toEqual([{ status: "queued", at: d.createdAt }]);
    expect(Date.parse(d.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(await expectBody(await read(t, d.id), 200, DeploymentSchema)).toEqual(d);
  });

  it("deploys a given branch, or a commit that is a branch head; refuses an unknown branch or commit (400 naming it)", async () => {
    const t = await seedTenant(h);
    const { p, repo } = await gitProject(t);
    const feature = await control.addCommit(repo.owner, repo.repo, "hotfix", "on hotfix");
    expect((await queued(t, { projectId: p.id, branch: "hotfix" })).commitSha).toBe(feature);
    // A commit alone: the branch whose head it is.
    const byCommit = await queued(t, { projectId: p.id, commit: feature.toUpperCase() });
    expect(byCommit).toMatchObject({ branch: "hotfix", commitSha: feature });
    await expectProblem(await queue(t, { projectId: p.id, branch: "nope" }), 400, "branch");
    await expectProblem(await queue(t, { projectId: p.id, commit: "c".repeat(40) }), 400, "commit");
    await expectProblem(await queue(t, { projectId: p.id, commit: "abc" }), 400, "commit");
    // The head of another branch than the one named.
    await expectProblem(await queue(t, { projectId: p.id, branch: "trunk", commit: feature }), 400, "commit");
    // An older commit of a branch is no branch head: it cannot be checked without fetching.
    const trunkHead = await control.revParse(repo.owner, repo.repo, "trunk");
    await control.addCommit(repo.owner, repo.repo, "trunk", "newer");
    await expectProblem(await queue(t, { projectId: p.id, commit: trunkHead }), 400, "commit");
  });

  it("an expired or unscanned upload is no source (the redeploy of a live one: build-access.test.ts)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const session = (over: Partial<typeof uploadSessions.$inferInsert>) => ({
      id: newId("ups"),
      orgId: t.orgId,
      target: "relay" as const,
      objectKey: `${t.orgId}/${newId("obj")}.tar.gz`,
      projectId: p.id,
      scannedAt: new Date(),
      expiresAt: new Date(Date.now() + 3600_000),
      ...over,
    });
    await h.db.insert(uploadSessions).values([session({ scannedAt: null }), session({ expiresAt: new Date(Date.now() - 1000) })]);
    await expectProblem(await queue(t, { projectId: p.id }), 409);
    // A live session whose tarball is no longer stored: 409, nothing queued.
    await h.db.insert(uploadSessions).values(session({}));
    expect((await expectProblem(await queue(t, { projectId: p.id }), 409)).detail).toMatch(/no longer stored/);
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, p.id))).toEqual([]);
  });

  it("targets a named environment; an unknown one is 400 naming environment", async () => {
    const t = await seedTenant(h);
    const { p, repo } = await gitProject(t);
    const dev = await control.addCommit(repo.owner, repo.repo, "dev", "dev work");
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201, EnvironmentSchema);
    // A preview environment deploys its own branch.
    expect(await queued(t, { projectId: p.id, environment: "staging" })).toMatchObject({ environment: "staging", branch: "dev", commitSha: dev });
    await expectProblem(await queue(t, { projectId: p.id, environment: "qa" }), 400, "environment");
    await expectProblem(await queue(t, { projectId: p.id, environment: "Not Valid" }), 400, "environment");
  });

  it("refuses a project with no source (409), a disabled one (409), bad bodies (400) and a foreign or unknown project (404)", async () => {
    const t = await seedTenant(h);
    const bare = await create(t);
    const noSource = await expectProblem(await queue(t, { projectId: bare.id }), 409);
    expect(noSource.detail).toMatch(/no source/);
    await expectProblem(await queue(t, { projectId: bare.id, branch: "main" }), 400, "branch");

    const { p } = await gitProject(t);
    await expectBody(await call(t, `/${p.id}/disable`, { method: "POST" }), 200, ProjectSchema);
    const disabled = await expectProblem(await queue(t, { projectId: p.id }), 409);
    expect(disabled.detail).toMatch(/disabled/);
    await expectBody(await call(t, `/${p.id}/enable`, { method: "POST" }), 200, ProjectSchema);
    await queued(t, { projectId: p.id });

    await expectProblem(await queue(t, {}), 400, "projectId");
    await expectProblem(await queue(t, { projectId: p.id, extra: 1 }), 400);
    const other = await seedTenant(h);
    await expectProblem(await queue(other, { projectId: p.id }), 404);
    await expectProblem(await queue(t, { projectId: "prj_missing" }), 404);
    // project:write, not project:deployment:list, queues.
    const reader = await seedMember(h, t.orgId, "member", { scopes: ["project:read", "project:deployment:list"] });
    await expectProblem(await queue(reader, { projectId: p.id }), 403);
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, bare.id))).toEqual([]);
  });
});

describe("deployments: cancel, promote, current", () => {
  it("cancels a queued or building deployment once; a finished one is 409", async () => {
    const t = await seedTenant(h);
    const { p } = await gitProject(t);
    const d = await queued(t, { projectId: p.id });
    const canceled = await expectBody(await act(t, d.id, "cancel"), 200, DeploymentSchema);
    expect(canceled.status).toBe("canceled");
    expect(canceled.finishedAt).not.toBeNull();
    expect(canceled.transitions.map((x) => x.status)).toEqual(["queued", "canceled"]);
    await expectProblem(await act(t, d.id, "cancel"), 409);

    const b = await seedQueued(p);
    await markStatus(h.db, b.id, "building", new Date());
    expect((await expectBody(await act(t, b.id, "cancel"), 200, DeploymentSchema)).status).toBe("canceled");
    const ready = await seedQueued(p);
    await runToReady(ready.id);
    await expectProblem(await act(t, ready.id, "cancel"), 409);
  });

  it("a ready deployment becomes current; promote rolls back to an older one; the project is live", async () => {
    const t = await seedTenant(h);
    const { p } = await gitProject(t);
    expect((await get(t, p.id)).status).toBe("created");
    const first = await queued(t, { projectId: p.id });
    await expectProblem(await act(t, first.id, "promote"), 409);
    await runToReady(first.id);
    const second = await queued(t, { projectId: p.id });
    await runToReady(second.id);
    expect((await get(t, p.id)).status).toBe("live");

    const [a, b] = await Promise.all([read(t, first.id), read(t, second.id)].map(async (r) => expectBody(await r, 200, DeploymentSchema)));
    expect(a).toMatchObject({ status: "ready", current: false });
    expect(b).toMatchObject({ status: "ready", current: true });
    expect(b!.transitions.map((x) => x.status)).toEqual(["queued", "building", "deploying", "ready"]);
    await expectProblem(await act(t, second.id, "promote"), 409);

    const promoted = await expectBody(await act(t, first.id, "promote"), 200, DeploymentSchema);
    expect(promoted).toMatchObject({ status: "ready", current: true });
    expect((await expectBody(await read(t, second.id), 200, DeploymentSchema)).current).toBe(false);
    expect((await get(t, p.id)).status).toBe("live");
    // The commit status compares against the current deployment.
    const status = await expectStatus(await call(t, `/${p.id}/commit-status`), 200);
    expect(status.deployedCommit).toBe(first.commitSha);
  });

  it("a crashed deployment or one whose build was pruned cannot be promoted (409, nothing changes); the read shows both marks", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const [pruned, crashed, live] = [await seedQueued(p), await seedQueued(p), await seedQueued(p)];
    for (const r of [pruned, crashed, live]) await markReady(h.db, r.id, new Date());
    const at = new Date("2030-01-01T00:00:00Z");
    await h.db.update(deployments).set({ prunedAt: at }).where(eq(deployments.id, pruned.id));
    await h.db.update(deployments).set({ crashedAt: at }).where(eq(deployments.id, crashed.id));
    expect((await expectProblem(await act(t, pruned.id, "promote"), 409)).detail).toMatch(/build was removed/);
    expect((await expectProblem(await act(t, crashed.id, "promote"), 409)).detail).toMatch(/crashed/);
    expect((await expectBody(await read(t, pruned.id), 200, DeploymentSchema)).prunedAt).toBe(at.toISOString());
    expect((await expectBody(await read(t, crashed.id), 200, DeploymentSchema)).crashedAt).toBe(at.toISOString());
    expect((await expectBody(await read(t, live.id), 200, DeploymentSchema)).current).toBe(true);
  });

  it("two concurrent promotes of one environment leave exactly one current (real Postgres)", async (ctx) => {
    if (!h.realConcurrency) return ctx.skip("needs a database that runs transactions concurrently");
    const t = await seedTenant(h);
    const p = await create(t);
    const rows = [await seedQueued(p), await seedQueued(p), await seedQueued(p)];
    for (const r of rows) await markReady(h.db, r.id, new Date());
    for (let round = 0; round < 5; round++) {
      const answers = await Promise.all([act(t, rows[0]!.id, "promote"), act(t, rows[1]!.id, "promote")]);
      expect(answers.map((r) => r.status).sort()).toEqual(expect.arrayContaining([200]));
      for (const r of answers) expect([200, 409]).toContain(r.status);
      const current = await h.db.select().from(deployments).where(eq(deployments.projectId, p.id));
      expect(current.filter((d) => d.current)).toHaveLength(1);
      await act(t, rows[2]!.id, "promote");
    }
  });
});

describe("deployments: lists, sessions, scoping", () => {
  it("the project's list filters by status and environment and shows source, timings and current", async () => {
    const t = await seedTenant(h);
    const { p } = await gitProject(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "trunk" } }), 201, EnvironmentSchema);
    const a = await queued(t, { projectId: p.id });
    await runToReady(a.id);
    const b = await queued(t, { projectId: p.id, environment: "staging" });
    const c = await queued(t, { projectId: p.id });
    await act(t, c.id, "cancel");

    const all = await list(t, p);
    expect(all.items.map((d) => d.id)).toEqual([c.id, b.id, a.id]);
    expect(all.items[2]).toMatchObject({ status: "ready", current: true, source: "git", commitSha: a.commitSha });
    expect(all.items[2]!.transitions.map((x) => x.status)).toEqual(["queued", "building", "deploying", "ready"]);
    expect((await list(t, p, "?status=ready")).items.map((d) => d.id)).toEqual([a.id]);
    expect((await list(t, p, "?status=canceled")).items.map((d) => d.id)).toEqual([c.id]);
    expect((await list(t, p, "?environment=staging")).items.map((d) => d.id)).toEqual([b.id]);
    expect((await list(t, p, "?environment=staging&status=ready")).items).toEqual([]);
    await expectProblem(await h.request(`/api/projects/${p.id}/deployments?status=done`, { token: t.token, org: t.orgId }), 400, "status");
  });

  it("a deployment session reads its project's deployments by id and no other", async () => {
    const t = await seedTenant(h);
    const { p } = await gitProject(t);
    const sibling = await create(t);
    const mine = await queued(t, { projectId: p.id });
    const theirs = await seedQueued(sibling);
    const s = await expectStatus(await call(t, `/${p.id}/deployment-session`, { method: "POST" }), 201);
    const session = { ...t, token: s.token };
    expect((await expectBody(await read(session, mine.id), 200, DeploymentSchema)).id).toBe(mine.id);
    await expectProblem(await read(session, theirs.id), 403);
    await expectProblem(await read(session, "dpl_missing"), 403);
    await expectProblem(await act(session, mine.id, "cancel"), 403);
    await expectProblem(await act(session, mine.id, "promote"), 403);
    await expectProblem(await queue(session, { projectId: p.id }), 403);
  });

  it("every deployment route answers 404 for another organization's deployment", async () => {
    const owner = await seedTenant(h);
    const { p } = await gitProject(owner);
    const d = await queued(owner, { projectId: p.id });
    const ready = await seedQueued(p);
    await runToReady(ready.id);
    const stranger = await seedTenant(h);
    await expectProblem(await read(stranger, d.id), 404);
    await expectProblem(await act(stranger, d.id, "cancel"), 404);
    await expectProblem(await act(stranger, ready.id, "promote"), 404);
    await expectProblem(await queue(stranger, { projectId: p.id }), 404);
    await expectProblem(await read(stranger, "dpl_unknown"), 404);
    // Nothing changed for the owner.
    expect((await expectBody(await read(owner, d.id), 200, DeploymentSchema)).status).toBe("queued");
  });
});
