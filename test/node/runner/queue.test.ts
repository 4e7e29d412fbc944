/**
 * The runner's queue on real Postgres (functions/self-hosted/runner/store.ts):
 * two runners on separate pools claiming many queued deployments at once never
 * take the same one; a job whose runner died (lease expired) is taken over and
 * restarted, recorded as transitions; a renew after a cancel or a takeover says
 * the job is lost; a released job is queued again.
 */
import { asc, eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { cancelDeployment, insertDeployment } from "../../../functions/deployments/store";
import { createOrganization, createUser } from "../../../functions/identity/store";
import { createProject } from "../../../functions/projects/store";
import { claimNext, releaseJob, renewLease } from "../../../functions/self-hosted/runner/store";
import { openPostgres, type PostgresDatabase } from "../../../shared/db/postgres";
import { deployments, deploymentTransitions, environments } from "../../../shared/db/schema";
import { freshDatabase, type FreshDatabase } from "../../support/fresh-database";

let fresh: FreshDatabase;
let a: PostgresDatabase;
let b: PostgresDatabase;

beforeAll(async () => {
  if (inject("pgKind") !== "postgres") throw new Error("the runner's queue tests need the run's Postgres");
  fresh = await freshDatabase(inject("pgUrl"), "runner_queue", { migrate: true });
  // Two runners, two pools: as two adapter processes on one database.
  a = await openPostgres(fresh.url, { migrate: false, max: 4 });
  b = await openPostgres(fresh.url, { migrate: false, max: 4 });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await fresh?.drop();
});

async function seedQueued(count: number) {
  const user = await createUser(a.db, { email: `q${Date.now()}${Math.random()}@example.test`, name: "Q" });
  const org = await createOrganization(a.db, "queue org", user.id);
  const project = await createProject(a.db, org.id, { name: "queued app" }, null, {});
  const [env] = await a.db.select().from(environments).where(eq(environments.projectId, project.id));
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const d = await a.db.transaction((tx) =>
      insertDeployment(tx, { orgId: org.id, projectId: project.id, environmentId: env!.id, commitSha: "a".repeat(40), branch: "trunk" }, new Date()),
    );
    ids.push(d.id);
  }
  return ids;
}

const statusesOf = async (id: string) =>
  (
    await a.db
      .select()
      .from(deploymentTransitions)
      .where(eq(deploymentTransitions.deploymentId, id))
      .orderBy(asc(deploymentTransitions.at), asc(deploymentTransitions.id))
  ).map((t) => t.status);

describe("runner queue (Postgres)", () => {
  it("two runners claiming 60 deployments at once never take the same one", async () => {
    const ids = await seedQueued(60);
    const claimed = { a: [] as string[], b: [] as string[] };
    const drain = async (db: PostgresDatabase, runner: "a" | "b") => {
      for (;;) {
        const d = await claimNext(db.db, `runner-${runner}`, new Date());
        if (!d) return;
        claimed[runner].push(d.id);
      }
    };
    await Promise.all([drain(a, "a"), drain(b, "b"), drain(a, "a"), drain(b, "b")]);
    const all = [...claimed.a, ...claimed.b];
    expect(new Set(all).size).toBe(all.length);
    expect(new Set(all)).toEqual(new Set(ids));
    expect(claimed.a.length).toBeGreaterThan(0);
    expect(claimed.b.length).toBeGreaterThan(0);
    const rows = await a.db.select().from(deployments).where(inArray(deployments.id, ids));
    for (const r of rows) {
      expect(r.status).toBe("building");
      expect(r.claimedBy).toBe(claimed.a.includes(r.id) ? "runner-a" : "runner-b");
      expect(r.leaseExpiresAt!.getTime()).toBeGreaterThan(Date.now());
    }
    for (const id of ids.slice(0, 5)) expect(await statusesOf(id)).toEqual(["queued", "building"]);
  });

  it("a job whose runner died is taken over after its lease and restarted; the dead runner's renew finds it lost", async () => {
    const [id] = await seedQueued(1);
    const first = await claimNext(a.db, "runner-dead", new Date(), 200);
    expect(first?.id).toBe(id);
    // Within the lease nobody else gets it.
    expect(await claimNext(b.db, "runner-alive", new Date())).toBeUndefined();
    await new Promise((r) => setTimeout(r, 300));
    const taken = await claimNext(b.db, "runner-alive", new Date());
    expect(taken).toMatchObject({ id, status: "building", claimedBy: "runner-alive" });
    expect(await statusesOf(id!)).toEqual(["queued", "building", "queued", "building"]);
    expect(await renewLease(a.db, id!, "runner-dead", new Date())).toBe(false);
    expect(await renewLease(b.db, id!, "runner-alive", new Date())).toBe(true);
  });

  it("takes only deployments placed on this instance: one queued for a server (or whose server's lease ran out) is left to the server", async () => {
    const [forServer, expired, local] = await seedQueued(3);
    await a.db
      .update(deployments)
      .set({ placement: "server" })
      .where(inArray(deployments.id, [forServer!, expired!]));
    // A server's build whose lease ran out is the server protocol's to take over, not this runner's.
    await a.db
      .update(deployments)
      .set({ status: "building", claimedBy: "srv_gone", leaseExpiresAt: new Date(Date.now() - 1000) })
      .where(eq(deployments.id, expired!));
    expect((await claimNext(a.db, "runner-a", new Date()))?.id).toBe(local);
    expect(await claimNext(b.db, "runner-b", new Date())).toBeUndefined();
    const [row] = await a.db.select().from(deployments).where(eq(deployments.id, forServer!));
    expect(row).toMatchObject({ status: "queued", claimedBy: null });
  });

  it("a canceled job's renew says lost; a released job is queued again, unclaimed", async () => {
    const [x, y] = await seedQueued(2);
    const dx = await claimNext(a.db, "runner-a", new Date());
    const dy = await claimNext(a.db, "runner-a", new Date());
    expect([dx?.id, dy?.id]).toEqual([x, y]);
    await cancelDeployment(a.db, dx!.orgId, x!, new Date());
    expect(await renewLease(a.db, x!, "runner-a", new Date())).toBe(false);
    await releaseJob(a.db, y!, "runner-a", new Date());
    const [row] = await a.db.select().from(deployments).where(eq(deployments.id, y!));
    expect(row).toMatchObject({ status: "queued", claimedBy: null, leaseExpiresAt: null });
    expect(await statusesOf(y!)).toEqual(["queued", "building", "queued"]);
    expect((await claimNext(b.db, "runner-b", new Date()))?.id).toBe(y);
  });
});
