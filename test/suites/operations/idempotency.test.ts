/**
 * Idempotency-Key (shared/http/idempotency.ts) on POST /api/projects, POST /api/deployments,
 * invitations and notification channels: a retry gets the first answer and creates nothing,
 * another body is 422, keys are per user and per route, bad keys are 400, keys expire after
 * 24 hours, a running first request makes a retry 409, and secrets in a kept answer are
 * stored encrypted and never logged.
 */
import { and, count, eq, sql } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { GitSourceSchema } from "../../../functions/projects/schema";
import { deployments, idempotencyKeys, notificationChannels, projects } from "../../../shared/db/schema";
import { IDEMPOTENCY_TTL_MS, pruneIdempotencyKeys } from "../../../shared/http/idempotency";
import { newId } from "../../../shared/ids";
import { gitServerControl } from "../../support/git-control";
import { storedIn, expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { identityHelpers } from "../../support/identity";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const { freshEmail, setRole } = identityHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));

const key = () => `key-${crypto.randomUUID()}`;

const post = (t: Member, path: string, json: unknown, idempotencyKey?: string) =>
  h.request(path, { token: t.token, json, headers: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey } });

const projectCount = async (orgId: string) => (await h.db.select({ n: count() }).from(projects).where(eq(projects.orgId, orgId)))[0]!.n;

/** The answer as a script sees it: status, content type, body text, replay mark. */
async function answer(res: Response) {
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text(), replayed: res.headers.get("idempotency-replayed") };
}

describe("Idempotency-Key", () => {
  it("a retry of POST /api/projects with the same key and body gets the first answer and creates nothing", async () => {
    const t = await seedTenant(h);
    const k = key();
    const body = { name: `idem ${newId("n")}` };
    const first = await answer(await post(t, "/api/projects", body, k));
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();
    for (let i = 0; i < 3; i++) {
      const again = await answer(await post(t, "/api/projects", body, k));
      expect(again).toEqual({ ...first, replayed: "true" });
    }
    expect(await projectCount(t.orgId)).toBe(1);
    // Without a key every POST creates.
    await expectStatus(await post(t, "/api/projects", body), 201);
    expect(await projectCount(t.orgId)).toBe(2);
  });

  it("the same key with another body is 422 naming Idempotency-Key, and nothing is created", async () => {
    const t = await seedTenant(h);
    const k = key();
    await expectStatus(await post(t, "/api/projects", { name: "first" }, k), 201);
    const p = await expectProblem(await post(t, "/api/projects", { name: "second" }, k), 422, "Idempotency-Key");
    expect(p.detail).toContain("another request");
    expect(await projectCount(t.orgId)).toBe(1);
    // Another organization is another request too (the same user, the same body).
    const other = await expectStatus<{ id: string }>(await h.request("/api/orgs", { token: t.token, json: { name: "second org" } }), 201);
    await expectProblem(
      await h.request("/api/projects", { token: t.token, org: other.id, json: { name: "first" }, headers: { "idempotency-key": k } }),
      422,
      "Idempotency-Key",
    );
  });

  it("keys are per user and per route: another user's or another route's same key is independent", async () => {
    const t = await seedTenant(h);
    const colleague = await seedMember(h, t.orgId, "admin");
    const k = key();
    const body = { name: "shared name" };
    const mine = await expectStatus(await post(t, "/api/projects", body, k), 201);
    const theirs = await expectStatus(await post(colleague, "/api/projects", body, k), 201);
    expect(theirs.id).not.toBe(mine.id);
    expect(await projectCount(t.orgId)).toBe(2);
    // The same key on another route.
    const channel = await post(t, "/api/notifications/channels", { kind: "in_app", label: "bell" }, k);
    expect(channel.status).toBe(201);
    expect(channel.headers.get("idempotency-replayed")).toBeNull();
  });

  it("a malformed key is 400 naming Idempotency-Key, and nothing is written", async () => {
    const t = await seedTenant(h);
    for (const bad of ["has space", "x".repeat(256), "tab\there"]) {
      await expectProblem(await post(t, "/api/projects", { name: "nope" }, bad), 400, "Idempotency-Key");
    }
    expect(await projectCount(t.orgId)).toBe(0);
    expect(
      await h.db
        .select()
        .from(idempotencyKeys)
        .where(eq(idempotencyKeys.principal, `user:${t.userId}`)),
    ).toHaveLength(0);
    // 255 visible characters are fine.
    await expectStatus(await post(t, "/api/projects", { name: "long key" }, `${"k".repeat(250)}${newId("").slice(-5)}`), 201);
  });

  it("a key expires 24 hours after its first request: then it runs anew", async () => {
    const t = await seedTenant(h);
    const k = key();
    const body = { name: "daily" };
    const first = await expectStatus(await post(t, "/api/projects", body, k), 201);
    const principal = `user:${t.userId}`;
    await h.db.execute(sql`update idempotency_keys set created_at = now() - interval '23 hours' where principal = ${principal} and key = ${k}`);
    expect((await expectStatus(await post(t, "/api/projects", body, k), 201)).id).toBe(first.id);
    await h.db.execute(sql`update idempotency_keys set created_at = now() - interval '24 hours 1 second' where principal = ${principal} and key = ${k}`);
    const res = await post(t, "/api/projects", body, k);
    expect(res.headers.get("idempotency-replayed")).toBeNull();
    expect((await expectStatus(res, 201)).id).not.toBe(first.id);
    expect(await projectCount(t.orgId)).toBe(2);
  });

  it("the sweep removes expired keys only, in batches", async () => {
    const t = await seedTenant(h);
    const principal = `user:${t.userId}`;
    const now = new Date();
    const old = new Date(now.getTime() - IDEMPOTENCY_TTL_MS - 1000);
    await h.db.insert(idempotencyKeys).values([
      { principal, route: "POST /api/projects", key: "old-1", requestHash: "x", createdAt: old },
      { principal, route: "POST /api/projects", key: "old-2", requestHash: "x", createdAt: old },
      { principal, route: "POST /api/projects", key: "fresh", requestHash: "x", createdAt: now },
    ]);
    const mine = async () =>
      (await h.db.select({ key: idempotencyKeys.key }).from(idempotencyKeys).where(eq(idempotencyKeys.principal, principal))).map((r) => r.key).sort();
    // Other tests' expired rows may be swept by the same calls: loop until ours are gone.
    for (let i = 0; i < 100 && (await mine()).length > 1; i++) await pruneIdempotencyKeys(h.db, now, 1);
    expect(await mine()).toEqual(["fresh"]);
  });

  it("a retry while the first request with the key is still running is 409", async () => {
    const t = await seedTenant(h);
    const k = key();
    const body = JSON.stringify({ name: "slow" });
    // The first request's claim, as it stands while its handler runs: no status yet.
    const res1 = await post(t, "/api/projects", JSON.parse(body), k);
    await expectStatus(res1, 201);
    const principal = `user:${t.userId}`;
    await h.db.execute(
      sql`update idempotency_keys set status = null, body_ciphertext = null, created_at = now() where principal = ${principal} and key = ${k}`,
    );
    const p = await expectProblem(await post(t, "/api/projects", JSON.parse(body), k), 409, "Idempotency-Key");
    expect(p.detail).toContain("still running");
    // A claim whose request never finished (its process ended) is taken over after 5 minutes.
    await h.db.execute(sql`update idempotency_keys set created_at = now() - interval '6 minutes' where principal = ${principal} and key = ${k}`);
    await expectStatus(await post(t, "/api/projects", JSON.parse(body), k), 201);
    expect(await projectCount(t.orgId)).toBe(2);
  });

  it("a validation 400 is kept and replayed; a 403 is not kept", async () => {
    const t = await seedTenant(h);
    const k = key();
    const bad = { name: "x", nosuchfield: 1 };
    const first = await answer(await post(t, "/api/projects", bad, k));
    expect(first.status).toBe(400);
    expect(await answer(await post(t, "/api/projects", bad, k))).toEqual({ ...first, replayed: "true" });
    // A viewer's 403 is not kept: once made an admin, the same key and body create.
    const viewer = await seedMember(h, t.orgId, "viewer");
    const k2 = key();
    await expectProblem(await post(viewer, "/api/projects", { name: "later" }, k2), 403);
    await expectStatus(await setRole(t.token, t.orgId, viewer.userId, "admin"), 200);
    await expectStatus(await post(viewer, "/api/projects", { name: "later" }, k2), 201);
  });

  it("POST /api/deployments: a retry returns the same queued deployment and queues nothing more", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await expectBody(
      await call(t, `/${p.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
      200,
      GitSourceSchema,
    );
    const k = key();
    const first = await expectBody(await post(t, "/api/deployments", { projectId: p.id }, k), 201, DeploymentSchema);
    const res = await post(t, "/api/deployments", { projectId: p.id }, k);
    expect(res.headers.get("idempotency-replayed")).toBe("true");
    expect((await expectBody(res, 201, DeploymentSchema)).id).toBe(first.id);
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, p.id))).toHaveLength(1);
  });

  it("secrets shown once (an invitation code, a channel's signing secret) replay intact, stored encrypted, never logged", async () => {
    const t = await seedTenant(h);
    const k = key();
    const email = freshEmail();
    const inv = await expectStatus(await post(t, `/api/orgs/${t.orgId}/invitations`, { email, role: "member" }, k), 201);
    const invAgain = await post(t, `/api/orgs/${t.orgId}/invitations`, { email, role: "member" }, k);
    expect(invAgain.headers.get("idempotency-replayed")).toBe("true");
    expect(await expectStatus(invAgain, 201)).toEqual(inv);

    const hook = { kind: "webhook", label: "hook", config: { url: "https://example.com/hook" } };
    const ch = await expectStatus(await post(t, "/api/notifications/channels", hook, k), 201);
    expect(ch.signingSecret).toMatch(/^whsec_/);
    const chAgain = await expectStatus(await post(t, "/api/notifications/channels", hook, k), 201);
    expect(chAgain.signingSecret).toBe(ch.signingSecret);
    expect(
      await h.db
        .select()
        .from(notificationChannels)
        .where(and(eq(notificationChannels.orgId, t.orgId), eq(notificationChannels.kind, "webhook"))),
    ).toHaveLength(1);

    const canaries = [inv.code as string, (ch.signingSecret as string).slice(6)];
    const logs = h.logs.join("\n");
    for (const canary of canaries) {
      expect(await storedIn(h, canary)).toEqual([]);
      expect(logs).not.toContain(canary);
    }
    // A ciphertext bound to its row does not decrypt as another's.
    const [row] = await h.db
      .select()
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.principal, `user:${t.userId}`), eq(idempotencyKeys.key, k), eq(idempotencyKeys.route, "POST /api/notifications/channels")));
    await expect(
      h.keyring.decrypt(row!.bodyCiphertext!, {
        orgId: `user:${t.userId}`,
        table: "idempotency_keys",
        column: "body_ciphertext",
        rowId: `POST /api/projects ${k}`,
      }),
    ).rejects.toThrow();
  });

  it("N parallel requests with one key create exactly one project (real Postgres)", async (ctx) => {
    if (!h.realConcurrency) return ctx.skip("needs a database that runs transactions concurrently");
    const t = await seedTenant(h);
    const k = key();
    const results = await Promise.all(Array.from({ length: 12 }, () => post(t, "/api/projects", { name: "raced" }, k)));
    const statuses = results.map((r) => r.status);
    for (const s of statuses) expect([201, 409]).toContain(s);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
    const ids = new Set((await Promise.all(results.filter((r) => r.status === 201).map((r) => r.json()))).map((b: { id: string }) => b.id));
    expect(ids.size).toBe(1);
    expect(await projectCount(t.orgId)).toBe(1);
  });
});
