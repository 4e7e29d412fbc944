/**
 * The runner protocol's claim and job routes (issue 22, item 3), as a build
 * server's runner calls them with its runner token: placement honoured by the
 * claim, one job per claim even when servers race, leases taken over after they
 * run out, transitions, idempotent log batches read back through the log routes,
 * the job's decrypted environment and clone credential for the lease holder only,
 * serving reports, the source download, rate limits, and who is refused (user
 * tokens 403, other organizations 404).
 */
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { CloneTokenState } from "../../../functions/projects/clone-token";
import { GitSourceSchema } from "../../../functions/projects/schema";
import { takeRateLimits } from "../../../functions/notifications/rate-limit";
import { SERVER_LIMITS } from "../../../functions/servers/limits";
import { MAX_LOG_BATCH_LINES } from "../../../functions/servers/runner-jobs-schema";
import { CreatedServerSchema, ServerSchema } from "../../../functions/servers/schema";
import { LogPageSchema } from "../../../functions/logs/schema";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { SourceLinkSchema } from "../../../functions/servers/runner-jobs-schema";
import { deployments, notificationEvents } from "../../../shared/db/schema";
import { deploymentHelpers } from "../../support/deployments";
import { gitServerControl } from "../../support/git-control";
import { folderClient } from "../../support/folder-client";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { currentRuntime, runtimeHasRealConcurrency, useRuntimeHarness } from "../../support/runtime";
import { tgz } from "../../support/tar-fixtures";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const { queue, read } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));
const folder = folderClient(h);

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

const register = async (t: Member, json: Record<string, unknown> = {}) =>
  expectBody(await h.request("/api/servers", { method: "POST", token: t.token, org: t.orgId, json: { name: "build", ...json } }), 201, CreatedServerSchema);
const queued = async (t: Member, json: Record<string, unknown>) => expectBody(await queue(t, json), 201, DeploymentSchema);
const claim = (token: string, wait = 0) => h.request(`/api/runner/claim?wait=${wait}`, { method: "POST", token });
/** The claimed job's id, or null for 204. */
async function claimed(token: string, wait = 0): Promise<string | null> {
  const res = await claim(token, wait);
  if (res.status === 204) return null;
  const body = await expectStatus(res, 200);
  expect(body.status).toBe("building");
  return body.id as string;
}
const job = (token: string, id: string, suffix: string, init: { method?: string; json?: unknown } = {}) =>
  h.request(`/api/runner/jobs/${id}${suffix}`, { method: init.method ?? "POST", token, json: init.json });
const get = (token: string, id: string, suffix = "") => h.request(`/api/runner/jobs/${id}${suffix}`, { token });
const row = async (id: string) => (await h.db.select().from(deployments).where(eq(deployments.id, id)))[0]!;
const expire = (id: string) =>
  h.db
    .update(deployments)
    .set({ leaseExpiresAt: new Date(Date.now() - 1000) })
    .where(eq(deployments.id, id));
const line = (seq: number, message: string) => ({ seq, kind: "build", stream: "stdout", at: new Date().toISOString(), message });

describe("runner protocol: claim", () => {
  it("claims a job placed on this server or on matching labels; nothing for another organization, unmatched labels, or a draining server", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const p = await gitProject(t);
    const gpu = await register(t, { labels: ["gpu", "eu"] });
    const plain = await register(t);
    const foreign = await register(other, { labels: ["gpu", "eu"] });

    const onPlain = await queued(t, { projectId: p.id, serverId: plain.id });
    expect(await claimed(gpu.token)).toBeNull();
    expect(await claimed(foreign.token)).toBeNull();
    const byLabel = await queued(t, { projectId: p.id, target: "server", labels: ["gpu"] });
    expect(await claimed(plain.token)).toBe(onPlain.id);
    // The labelled one needs gpu: not for the plain server, nor for another organization's gpu server.
    expect(await claimed(plain.token)).toBeNull();
    expect(await claimed(foreign.token)).toBeNull();
    expect(await claimed(gpu.token)).toBe(byLabel.id);
    expect(await row(byLabel.id)).toMatchObject({ status: "building", claimedBy: gpu.id });
    expect(await row(onPlain.id)).toMatchObject({ status: "building", claimedBy: plain.id });
    // A claim counts as a heartbeat.
    const seen = await expectBody(await h.request(`/api/servers/${gpu.id}`, { token: t.token, org: t.orgId }), 200, ServerSchema);
    expect(seen.lastSeenAt).not.toBeNull();

    await expectStatus(await h.request(`/api/servers/${gpu.id}`, { method: "PATCH", token: t.token, org: t.orgId, json: { draining: true } }), 200);
    const onDrained = await queued(t, { projectId: p.id, serverId: gpu.id });
    expect(await claimed(gpu.token)).toBeNull();
    expect(await row(onDrained.id)).toMatchObject({ status: "queued", claimedBy: null });
  });

  it("a waiting claim gets a job queued while it waits; wait is capped (400 naming wait)", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const started = Date.now();
    const waiting = claimed(s.token, 5);
    await new Promise((r) => setTimeout(r, 400));
    const d = await queued(t, { projectId: p.id, serverId: s.id });
    expect(await waiting).toBe(d.id);
    expect(Date.now() - started).toBeLessThan(5000);
    const problem = await expectProblem(await claim(s.token, 26), 400);
    expect(problem.field).toBe("wait");
  });

  it.runIf(runtimeHasRealConcurrency(currentRuntime()))("two servers claiming at once never take the same job", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const a = await register(t);
    const b = await register(t);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await queued(t, { projectId: p.id, target: "server" })).id);
    const got = await Promise.all(Array.from({ length: 8 }, (_, i) => claimed(i % 2 ? a.token : b.token)));
    const jobs = got.filter((x): x is string => x !== null);
    expect(jobs.sort()).toEqual([...ids].sort());
    for (const id of ids) expect([a.id, b.id]).toContain((await row(id)).claimedBy);
  });

  it("a job whose lease ran out is taken over; the first server's writes then answer 409", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const a = await register(t);
    const b = await register(t);
    const d = await queued(t, { projectId: p.id, target: "server" });
    expect(await claimed(a.token)).toBe(d.id);
    expect(await claimed(b.token)).toBeNull();
    await expire(d.id);
    expect(await claimed(b.token)).toBe(d.id);
    expect(await row(d.id)).toMatchObject({ status: "building", claimedBy: b.id });
    await expectProblem(await job(a.token, d.id, "/renew"), 409);
    await expectProblem(await job(a.token, d.id, "/advance", { json: { from: ["building"], to: "deploying" } }), 409);
    await expectStatus(await job(b.token, d.id, "/renew"), 200);
    const reread = await expectBody(await read(t, d.id), 200, DeploymentSchema);
    expect(reread.transitions.map((x) => x.status)).toEqual(["queued", "building", "queued", "building"]);
  });
});

describe("runner protocol: a job's life", () => {
  it("renew, advance, serving, ready (repeat answers the same), release; 409 once it is not the server's", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const d = await queued(t, { projectId: p.id, target: "server" });
    expect(await claimed(s.token)).toBe(d.id);
    const lease = await expectStatus(await job(s.token, d.id, "/renew"), 200);
    expect(Date.parse(lease.leaseExpiresAt)).toBeGreaterThan(Date.now());
    const moved = await expectStatus(await job(s.token, d.id, "/advance", { json: { from: ["building"], to: "deploying" } }), 200);
    expect(moved.status).toBe("deploying");
    // The same move again (a retry after a lost answer): not in `from` any more.
    await expectProblem(await job(s.token, d.id, "/advance", { json: { from: ["building"], to: "deploying" } }), 409);
    const bad = await expectProblem(await job(s.token, d.id, "/advance", { json: { from: ["building"], to: "ready" } }), 400);
    expect(bad.field).toBe("to");
    await expectStatus(await h.request(`/api/runner/jobs/${d.id}/serving`, { method: "PUT", token: s.token, json: { port: 40123 } }), 204);
    const ready = await expectStatus(await job(s.token, d.id, "/ready"), 200);
    expect(ready).toMatchObject({ status: "ready", current: true });
    expect(await expectStatus(await job(s.token, d.id, "/ready"), 200)).toMatchObject({ status: "ready", current: true });
    expect(await row(d.id)).toMatchObject({ servedBy: s.id, port: 40123 });
    // Finished: the lease is over, serving reports still hold.
    await expectProblem(await job(s.token, d.id, "/renew"), 409);
    await expectStatus(await job(s.token, d.id, "/down"), 204);
    expect((await row(d.id)).port).toBeNull();
    await expectStatus(await h.request(`/api/runner/jobs/${d.id}/serving`, { method: "PUT", token: s.token, json: { port: 40124 } }), 204);
    expect((await row(d.id)).port).toBe(40124);

    const next = await queued(t, { projectId: p.id, target: "server" });
    expect(await claimed(s.token)).toBe(next.id);
    await expectStatus(await job(s.token, next.id, "/release"), 204);
    expect(await row(next.id)).toMatchObject({ status: "queued", claimedBy: null, leaseExpiresAt: null });
    await expectProblem(await job(s.token, next.id, "/release"), 409);
    expect(await claimed(s.token)).toBe(next.id);
    const failed = await expectStatus(
      await job(s.token, next.id, "/advance", { json: { from: ["building", "deploying"], to: "failed", failureReason: "npm run build exited with 1" } }),
      200,
    );
    expect(failed.status).toBe("failed");
    expect(await expectBody(await read(t, next.id), 200, DeploymentSchema)).toMatchObject({ status: "failed", failureReason: "npm run build exited with 1" });
  });

  it("a retried log batch is stored once, in order, and read through the deployment's log route; batches are bounded", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const d = await queued(t, { projectId: p.id, target: "server" });
    expect(await claimed(s.token)).toBe(d.id);
    const batch = { lines: [line(1, "install"), line(2, "build"), line(3, "compiled")] };
    expect(await expectStatus(await job(s.token, d.id, "/logs", { json: batch }), 200)).toEqual({ stored: 3, lastSeq: 3 });
    expect(await expectStatus(await job(s.token, d.id, "/logs", { json: batch }), 200)).toEqual({ stored: 0, lastSeq: 3 });
    const overlapping = { lines: [line(3, "compiled"), line(5, "started"), line(4, "bundled")] };
    expect(await expectStatus(await job(s.token, d.id, "/logs", { json: overlapping }), 200)).toEqual({ stored: 2, lastSeq: 5 });
    const page = await expectBody(await h.request(`/api/deployments/${d.id}/logs`, { token: t.token, org: t.orgId }), 200, LogPageSchema);
    expect(page.items.map((l) => l.message)).toEqual(["install", "build", "compiled", "bundled", "started"]);

    const tooMany = { lines: Array.from({ length: MAX_LOG_BATCH_LINES + 1 }, (_, i) => line(100 + i, "x")) };
    expect((await expectProblem(await job(s.token, d.id, "/logs", { json: tooMany }), 400)).field).toBe("lines");
    const tooBig = { lines: Array.from({ length: 80 }, (_, i) => line(2000 + i, "y".repeat(16 * 1024))) };
    await expectProblem(await job(s.token, d.id, "/logs", { json: tooBig }), 413);
    const badSeq = { lines: [{ ...line(0, "zero"), seq: 0 }] };
    expect((await expectProblem(await job(s.token, d.id, "/logs", { json: badSeq }), 400)).field).toMatch(/^lines/);
    const again = await expectBody(await h.request(`/api/deployments/${d.id}/logs`, { token: t.token, org: t.orgId }), 200, LogPageSchema);
    expect(again.items).toHaveLength(5);
  });

  it("the job's secret environment and clone credential reach only the lease holder, and never the logs", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const holder = await register(t);
    const bystander = await register(t);
    const canary = `canary-secret-${Date.now()}`;
    const cloneCanary = `ghp_canary${Date.now()}`;
    await expectStatus(await call(t, `/${p.id}/env`, { method: "PATCH", json: { upserts: [{ key: "API_KEY", value: canary, isSecret: true }] } }), 200);
    await expectBody(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: cloneCanary } }), 200, CloneTokenState);
    const d = await queued(t, { projectId: p.id, target: "server" });
    expect(await claimed(holder.token)).toBe(d.id);

    const ctx = await expectStatus(await get(holder.token, d.id), 200);
    expect(ctx.env.API_KEY).toBe(canary);
    expect(ctx.secrets).toContain(canary);
    expect(ctx).toMatchObject({ d: { id: d.id, projectId: p.id }, project: { id: p.id }, environment: { name: "production" } });
    expect((await expectStatus(await get(holder.token, d.id, "/clone-credential"), 200)).token).toBe(cloneCanary);

    const refused = [await get(bystander.token, d.id), await get(bystander.token, d.id, "/clone-credential")];
    for (const res of refused) {
      const text = await res.text();
      expect(res.status).toBe(409);
      expect(text).not.toContain(canary);
      expect(text).not.toContain(cloneCanary);
    }
    // The lease ends (handed back): the clone credential is refused.
    await expectStatus(await job(holder.token, d.id, "/release"), 204);
    await expectProblem(await get(holder.token, d.id, "/clone-credential"), 409);
    await expectProblem(await get(holder.token, d.id), 409);
    const logs = h.logs.join("\n");
    expect(logs).not.toContain(canary);
    expect(logs).not.toContain(cloneCanary);
  });
});

describe("runner protocol: serving reports", () => {
  it("only the server serving the app reports it down, asleep, stopped or crashed; another server of the organization gets 409", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const other = await register(t);
    const first = await queued(t, { projectId: p.id, serverId: s.id });
    expect(await claimed(s.token)).toBe(first.id);
    await expectStatus(await job(s.token, first.id, "/advance", { json: { from: ["building"], to: "deploying" } }), 200);
    await expectStatus(await h.request(`/api/runner/jobs/${first.id}/serving`, { method: "PUT", token: s.token, json: { port: 40200 } }), 204);
    await expectStatus(await job(s.token, first.id, "/ready"), 200);

    // What each server must run: only its own apps.
    const serving = async (token: string) =>
      (await expectStatus(await h.request("/api/runner/serving", { token }), 200)).items.map((x: { id: string }) => x.id);
    expect(await serving(s.token)).toEqual([first.id]);
    expect(await serving(other.token)).toEqual([]);
    // The other server restarting forgets only its own ports.
    await expectStatus(await h.request("/api/runner/forget-ports", { method: "POST", token: other.token }), 204);
    expect((await row(first.id)).port).toBe(40200);
    await expectStatus(await h.request("/api/runner/forget-ports", { method: "POST", token: s.token }), 204);
    expect((await row(first.id)).port).toBeNull();
    await expectStatus(await h.request(`/api/runner/jobs/${first.id}/serving`, { method: "PUT", token: s.token, json: { port: 40200 } }), 204);

    for (const suffix of ["/down", "/crashed"]) await expectProblem(await job(other.token, first.id, suffix), 409);
    await expectProblem(await job(other.token, first.id, "/asleep", { json: { cutoff: new Date().toISOString() } }), 409);
    await expectProblem(await h.request(`/api/runner/jobs/${first.id}/serving`, { method: "PUT", token: other.token, json: { port: 1 } }), 409);
    expect(await row(first.id)).toMatchObject({ servedBy: s.id, port: 40200, crashedAt: null, asleepAt: null });

    // A request after the cutoff keeps it awake; none since: asleep, no port.
    await h.db.update(deployments).set({ lastRequestAt: new Date() }).where(eq(deployments.id, first.id));
    await expectStatus(await job(s.token, first.id, "/asleep", { json: { cutoff: new Date(Date.now() - 60_000).toISOString() } }), 204);
    expect((await row(first.id)).asleepAt).toBeNull();
    const asleep = await expectStatus(await job(s.token, first.id, "/asleep", { json: { cutoff: new Date(Date.now() + 1000).toISOString() } }), 200);
    expect(asleep.id).toBe(first.id);
    expect(await row(first.id)).toMatchObject({ port: null });
    expect((await row(first.id)).asleepAt).not.toBeNull();

    // A newer deployment replaces it: the old one's port is cleared when it stops; the new one is given up.
    const second = await queued(t, { projectId: p.id, serverId: s.id });
    expect(await claimed(s.token)).toBe(second.id);
    await expectStatus(await job(s.token, second.id, "/advance", { json: { from: ["building"], to: "deploying" } }), 200);
    await expectStatus(await h.request(`/api/runner/jobs/${second.id}/serving`, { method: "PUT", token: s.token, json: { port: 40201 } }), 204);
    await expectStatus(await job(s.token, second.id, "/ready"), 200);
    await expectStatus(await h.request(`/api/runner/jobs/${first.id}/serving`, { method: "PUT", token: s.token, json: { port: 40202 } }), 204);
    await expectStatus(await h.request(`/api/runner/jobs/${first.id}/serving`, { method: "DELETE", token: s.token }), 204);
    expect(await row(first.id)).toMatchObject({ current: false, port: null });
    const crashed = await expectStatus(await job(s.token, second.id, "/crashed"), 200);
    expect(crashed.id).toBe(second.id);
    expect((await row(second.id)).crashedAt).not.toBeNull();
  });
});

describe("runner protocol: an upload job's source", () => {
  it("the lease holder gets a short-lived download of the archive (presigned on object storage, streamed on disk); refused after the lease, 404 for a git job", async () => {
    const t = await seedTenant(h);
    const s = await register(t);
    const bytes = await tgz({
      "package.json": JSON.stringify({ name: "web", scripts: { start: "node server.js" } }),
      "server.js": "require('http').createServer((q, r) => r.end('ok')).listen(process.env.PORT)\n",
    });
    const { target } = await folder.uploadAndScan(t, bytes);
    const project = await expectBody(await folder.ensure(t, { name: `app ${target.sessionId}`, uploadSessionId: target.sessionId }), 201, EnsuredProjectSchema);
    const d = await queued(t, { projectId: project.id, target: "server" });
    expect(d.source).toBe("upload");
    expect(await claimed(s.token)).toBe(d.id);

    const link = await expectBody(await get(s.token, d.id, "/source"), 200, SourceLinkSchema);
    expect(link.sizeBytes).toBe(bytes.length);
    const got = link.requiresAuth ? await h.request(new URL(link.url).pathname, { token: s.token }) : await fetch(link.url);
    expect(got.status).toBe(200);
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(bytes);
    if (link.requiresAuth) {
      expect(link.expiresAt).toBeNull();
      // The archive route takes the runner token only.
      await expectProblem(await h.request(new URL(link.url).pathname, { token: t.token, org: t.orgId }), 403);
    } else expect(Date.parse(link.expiresAt!)).toBeGreaterThan(Date.now());

    await expectStatus(await job(s.token, d.id, "/release"), 204);
    await expectProblem(await get(s.token, d.id, "/source"), 409);
    await expectProblem(await get(s.token, d.id, "/source/archive"), 409);

    const p = await gitProject(t);
    const git = await queued(t, { projectId: p.id, serverId: s.id });
    // The released upload job is older: claimed first, then the git one.
    expect(await claimed(s.token)).toBe(d.id);
    expect(await claimed(s.token)).toBe(git.id);
    await expectProblem(await get(s.token, git.id, "/source"), 404);
  });
});

describe("runner protocol: who is refused", () => {
  it("a user's token is 403 on the protocol; a runner token on another organization's job is 404 like an unknown one, and changes nothing", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const foreign = await register(other);
    const d = await queued(t, { projectId: p.id, target: "server" });

    await expectProblem(await h.request("/api/runner/claim?wait=0", { method: "POST", token: t.token, org: t.orgId }), 403);
    await expectProblem(await h.request(`/api/runner/jobs/${d.id}`, { token: t.token, org: t.orgId }), 403);
    expect(await row(d.id)).toMatchObject({ status: "queued", claimedBy: null });

    expect(await claimed(s.token)).toBe(d.id);
    const calls: Array<[string, Response]> = [
      ["context", await get(foreign.token, d.id)],
      ["clone-credential", await get(foreign.token, d.id, "/clone-credential")],
      ["renew", await job(foreign.token, d.id, "/renew")],
      ["advance", await job(foreign.token, d.id, "/advance", { json: { from: ["building"], to: "failed" } })],
      ["logs", await job(foreign.token, d.id, "/logs", { json: { lines: [line(1, "foreign")] } })],
      ["release", await job(foreign.token, d.id, "/release")],
      ["crashed", await job(foreign.token, d.id, "/crashed")],
      ["unknown", await job(foreign.token, "dpl_doesnotexist", "/renew")],
    ];
    for (const [what, res] of calls) expect(res.status, what).toBe(404);
    expect(await row(d.id)).toMatchObject({ status: "building", claimedBy: s.id, runnerLogSeq: 0 });
  });
});

describe("runner protocol: rate limits", () => {
  it("claims and job calls per server answer 429 with Retry-After past their limit, and change nothing", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const d = await queued(t, { projectId: p.id, target: "server" });
    // The window filled up to one short of the limit (as that many calls would), then the calls themselves.
    const fill = (key: string, limit: { max: number; windowMs: number }) => takeRateLimits(h.db, [{ key, n: limit.max - 1, ...limit }], new Date());
    await fill(`runner:claim:${s.id}`, SERVER_LIMITS.claimsPerServer);
    expect(await claimed(s.token)).toBe(d.id);
    const tooManyClaims = await claim(s.token);
    expect(tooManyClaims.headers.get("retry-after")).toMatch(/^\d+$/);
    await expectProblem(tooManyClaims, 429);

    await fill(`runner:job:${s.id}`, SERVER_LIMITS.jobCallsPerServer);
    await expectStatus(await job(s.token, d.id, "/advance", { json: { from: ["building"], to: "deploying" } }), 200);
    const before = await row(d.id);
    const refused = [
      await job(s.token, d.id, "/renew"),
      await job(s.token, d.id, "/logs", { json: { lines: [line(1, "over the limit")] } }),
      await job(s.token, d.id, "/advance", { json: { from: ["deploying"], to: "failed" } }),
    ];
    for (const res of refused) {
      expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
      await expectProblem(res, 429);
    }
    const after = await row(d.id);
    expect(after).toMatchObject({ status: "deploying", leaseExpiresAt: before.leaseExpiresAt, runnerLogSeq: 0 });
  });
});

describe("runner protocol: events, leftovers, autoRollback and the reconcile reads", () => {
  it("every remaining RunnerControl method has its route: the server's own jobs only (409 for another server's, 404 for another organization's)", {
    timeout: 120_000,
  }, async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const p = await gitProject(t);
    const s = await register(t);
    const s2 = await register(t);
    const foreign = await register(other);
    const live = async (id: string) => {
      expect(await claimed(s.token)).toBe(id);
      await expectStatus(await job(s.token, id, "/advance", { json: { from: ["building"], to: "deploying" } }), 200);
      await expectStatus(await h.request(`/api/runner/jobs/${id}/serving`, { method: "PUT", token: s.token, json: { port: 40300 } }), 204);
      await expectStatus(await job(s.token, id, "/ready"), 200);
    };
    const d1 = await queued(t, { projectId: p.id, serverId: s.id });
    await live(d1.id);
    const envId = (await row(d1.id)).environmentId;
    const post = (token: string, path: string, json?: unknown) => h.request(`/api/runner${path}`, { method: "POST", token, json });

    // An event about the job: the organization, project and deployment are the job's.
    const event = { category: "deploy.succeeded", title: "Deployed", message: "live", data: { deploymentId: "dpl_forged" } };
    await expectStatus(await job(s.token, d1.id, "/events", { json: event }), 204);
    await expectProblem(await job(s2.token, d1.id, "/events", { json: event }), 409);
    await expectProblem(await job(foreign.token, d1.id, "/events", { json: event }), 404);
    expect((await expectProblem(await job(s.token, d1.id, "/events", { json: { ...event, category: "member.joined" } }), 400)).field).toBe("category");
    // A job that failed no longer names its claimer: its failure event and archive are reported by a server it was placed on.
    const failing = await queued(t, { projectId: p.id, serverId: s.id });
    expect(await claimed(s.token)).toBe(failing.id);
    await expectStatus(await job(s.token, failing.id, "/advance", { json: { from: ["building"], to: "failed", failureReason: "exit 1" } }), 200);
    const failedEvent = { category: "build.failed", title: "Build failed", message: "exit 1", data: { stage: "build" } };
    await expectProblem(await job(s2.token, failing.id, "/events", { json: failedEvent }), 409);
    await expectStatus(await job(s.token, failing.id, "/events", { json: failedEvent }), 204);
    await expectStatus(await h.request(`/api/runner/jobs/${failing.id}/source`, { method: "DELETE", token: s.token }), 204);
    const stored = await h.db.select().from(notificationEvents).where(eq(notificationEvents.orgId, t.orgId));
    expect(stored.map((e) => [e.category, (e.data as { deploymentId: string }).deploymentId]).sort()).toEqual([
      ["build.failed", failing.id],
      ["deploy.succeeded", d1.id],
    ]);

    // The environment, its current deployment; another organization's is 404.
    expect(await expectStatus(await h.request(`/api/runner/environments/${envId}`, { token: s.token }), 200)).toEqual({
      name: "production",
      autoRollback: true,
    });
    expect((await expectStatus(await h.request(`/api/runner/environments/${envId}/current`, { token: s.token }), 200)).deployment.id).toBe(d1.id);
    await expectProblem(await h.request(`/api/runner/environments/${envId}/current`, { token: foreign.token }), 404);

    // A newer one replaces it; the rollback target of the newer is the older, promoted by the server serving it.
    const d2 = await queued(t, { projectId: p.id, serverId: s.id });
    await live(d2.id);
    expect((await expectStatus(await get(s.token, d2.id, "/rollback-target"), 200)).deployment.id).toBe(d1.id);
    await expectProblem(await get(s2.token, d2.id, "/rollback-target"), 409);
    await expectProblem(await job(s2.token, d1.id, "/promote"), 409);
    expect(await expectStatus(await job(s.token, d1.id, "/promote"), 200)).toMatchObject({ id: d1.id, current: true });
    const superseded = await expectStatus(await h.request(`/api/runner/environments/${envId}/superseded?keep=0`, { token: s.token }), 200);
    expect(superseded.ids).toEqual([d2.id]);
    expect((await expectStatus(await h.request(`/api/runner/environments/${envId}/superseded?keep=0`, { token: s2.token }), 200)).ids).toEqual([]);
    await expectStatus(await job(s.token, d2.id, "/pruned"), 204);
    expect((await row(d2.id)).prunedAt).not.toBeNull();
    await expectProblem(await job(s.token, d2.id, "/promote"), 409);

    // Leftovers: the kept build's size, the source archive (a git job has none: a no-op).
    await expectStatus(await h.request(`/api/runner/jobs/${d1.id}/work-dir-bytes`, { method: "PUT", token: s.token, json: { bytes: 4096 } }), 204);
    expect((await row(d1.id)).workDirBytes).toBe(4096);
    await expectProblem(await h.request(`/api/runner/jobs/${d1.id}/work-dir-bytes`, { method: "PUT", token: s2.token, json: { bytes: 1 } }), 409);
    await expectStatus(await h.request(`/api/runner/jobs/${d1.id}/source`, { method: "DELETE", token: s.token }), 204);
    await expectProblem(await h.request(`/api/runner/jobs/${d1.id}/source`, { method: "DELETE", token: foreign.token }), 404);

    // The project's sandbox uid: stable, for a server that worked on the project only.
    const uid = (token: string) => h.request(`/api/runner/projects/${p.id}/sandbox-uid?first=300000&last=300999`, { token });
    const first = (await expectStatus(await uid(s.token), 200)).uid;
    expect(first).toBeGreaterThanOrEqual(300000);
    expect((await expectStatus(await uid(s.token), 200)).uid).toBe(first);
    await expectProblem(await uid(s2.token), 409);
    await expectProblem(await uid(foreign.token), 404);

    // The reconcile reads: another organization's ids are left out like unknown ones.
    await h.db
      .update(deployments)
      .set({ updatedAt: new Date(Date.now() - 60_000), lastRequestAt: null })
      .where(eq(deployments.id, d1.id));
    for (const [token, mine] of [
      [s.token, true],
      [foreign.token, false],
    ] as const) {
      expect((await expectStatus(await post(token, "/projects/alive", { ids: [p.id, "prj_doesnotexist"] }), 200)).ids).toEqual(mine ? [p.id] : []);
      expect((await expectStatus(await post(token, "/deployments/still-serving", { ids: [d1.id, d2.id] }), 200)).ids).toEqual(mine ? [d1.id] : []);
      const idle = await expectStatus(await post(token, "/deployments/idle", { ids: [d1.id], cutoff: new Date().toISOString() }), 200);
      expect(idle.ids).toEqual(mine ? [d1.id] : []);
      const statuses = await expectStatus(await post(token, "/deployments/statuses", { ids: [d1.id, "dpl_doesnotexist"] }), 200);
      expect(statuses.statuses).toEqual(mine ? { [d1.id]: "ready" } : {});
    }
    expect(await expectStatus(await post(s.token, "/wake-always-on"), 200)).toEqual({ woken: 0 });
    const tooMany = Array.from({ length: 1001 }, (_, i) => `dpl_${i}`);
    expect((await expectProblem(await post(s.token, "/deployments/statuses", { ids: tooMany }), 400)).field).toBe("ids");
    await expectProblem(await h.request("/api/runner/deployments/statuses", { method: "POST", token: t.token, org: t.orgId, json: { ids: [] } }), 403);
  });
});
