/**
 * Two runners (two adapters' services, separate pools and data directories, so
 * separate RUNNER_IDs) on one Postgres database: many queued deployments are
 * each built exactly once; a job left by a runner that died (its lease ran out)
 * is picked up and finished by a live one.
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertDeployment, transition } from "../../../functions/deployments/store";
import { deployments, environments } from "../../../shared/db/schema";
import { startGitServer, type GitTestServer } from "../../support/git-server";
import { seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { type RunnerServer, runnerFixture, startRunnerServer } from "../../support/runner-harness";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

let git: GitTestServer;
let fixture: Awaited<ReturnType<typeof runnerFixture>>;
let one: RunnerServer;
let two: RunnerServer;
let secondDir: string;
const c = runnerClient(
  () => one,
  () => git,
);

beforeAll(async () => {
  git = await startGitServer();
  fixture = await runnerFixture("runner_pair");
  secondDir = mkdtempSync(join(tmpdir(), "runner_pair-second-"));
  const common = { databaseUrl: fixture.db.url, gitUrl: git.url, env: { RUNNER_CONCURRENCY: "2" } };
  one = await startRunnerServer({ ...common, dataDir: fixture.dataDir });
  two = await startRunnerServer({ ...common, dataDir: secondDir });
}, 60_000);
afterAll(async () => {
  await one?.close();
  await two?.close();
  await git?.close();
  await fixture?.drop();
  rmSync(secondDir, { recursive: true, force: true });
});

describe("runner: two runners on one database", () => {
  it("builds each of 8 queued deployments exactly once", { timeout: 120_000 }, async () => {
    expect(one.node.runner!.id).not.toBe(two.node.runner!.id);
    const t = await seedTenant(one);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { p } = await c.gitProject(t, [{ key: "APP_VERSION", value: `p${i}` }]);
      ids.push((await c.deploy(t, p.id)).id, (await c.deploy(t, p.id)).id);
    }
    two.node.services.wakeRunner?.();
    const done = await Promise.all(ids.map((id) => c.waitFor(t, id, ["ready", "failed"], 100_000)));
    for (const d of done) {
      expect(d.failureReason).toBeNull();
      expect(d.transitions.map((x) => x.status)).toEqual(["queued", "building", "deploying", "ready"]);
    }
    const rows = await Promise.all(ids.map((id) => c.row(id)));
    const servedBy = new Set(rows.map((r) => r.servedBy));
    expect([...servedBy].every((r) => r === one.node.runner!.id || r === two.node.runner!.id)).toBe(true);
    expect(servedBy.size).toBe(2);
    // Each build ran once: one "Running npm install" per deployment.
    for (const id of ids) expect((await c.logsOf(id)).filter((l) => l.message === "Running npm install")).toHaveLength(1);
  });

  it("picks up a job whose runner died once its lease has run out", { timeout: 60_000 }, async () => {
    const t = await seedTenant(one);
    const { p, repo, commit } = await c.gitProject(t, [{ key: "APP_VERSION", value: "orphan" }]);
    const [env] = await one.db.select().from(environments).where(eq(environments.projectId, p.id));
    // A runner claimed it and died: building, its lease already over (never queued in between, so no live runner took it first).
    const orphan = await one.db.transaction(async (tx) => {
      const d = await insertDeployment(
        tx,
        {
          orgId: t.orgId,
          projectId: p.id,
          environmentId: env!.id,
          gitProvider: "gitea",
          gitOwner: repo.owner,
          gitRepo: repo.repo,
          branch: "trunk",
          commitSha: commit,
          createdBy: t.userId,
        },
        new Date(Date.now() - 2000),
      );
      await transition(tx, d, "building", new Date(Date.now() - 1000));
      await tx
        .update(deployments)
        .set({ claimedBy: "dead-runner", leaseExpiresAt: new Date(Date.now() - 1000) })
        .where(eq(deployments.id, d.id));
      return d;
    });
    const ready = await c.waitFor(t, orphan.id, ["ready", "failed"]);
    expect(ready.failureReason).toBeNull();
    expect(ready.transitions.map((x) => x.status)).toEqual(["queued", "building", "queued", "building", "deploying", "ready"]);
    expect([one.node.runner!.id, two.node.runner!.id]).toContain((await c.row(orphan.id)).servedBy);
  });
});
