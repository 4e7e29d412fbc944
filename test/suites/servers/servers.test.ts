/**
 * Build servers (issue 22, item 1): registration with a runner token shown once,
 * members and admins, input checks, status from the runner's heartbeat, drain,
 * delete (token refused at once, builds handed back, apps stopped), the runner
 * token refused on user routes, and Settings' defaultServerId.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { markStatus } from "../../../functions/deployments/store";
import { SERVER_LIMITS } from "../../../functions/servers/limits";
import { CreatedServerSchema, DeletedServerSchema, HeartbeatAnswerSchema, ServerSchema } from "../../../functions/servers/schema";
import { deployments, notificationEvents, servers } from "../../../shared/db/schema";
import { pageOf } from "../../../shared/http/pagination";
import { storedIn, expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const ServerPage = pageOf(ServerSchema, "ServerPage");

const h = useRuntimeHarness();
const { create: createProject, addDeployment } = projectHelpers(h);

const register = (t: Member, json: unknown) => h.request("/api/servers", { method: "POST", token: t.token, org: t.orgId, json });
const registered = async (t: Member, json: Record<string, unknown> = {}) =>
  expectBody(await register(t, { name: "build-1", ...json }), 201, CreatedServerSchema);
const read = (t: Member, id: string) => h.request(`/api/servers/${id}`, { token: t.token, org: t.orgId });
const listOf = async (t: Member) => expectBody(await h.request("/api/servers", { token: t.token, org: t.orgId }), 200, ServerPage);
const patch = (t: Member, id: string, json: unknown) => h.request(`/api/servers/${id}`, { method: "PATCH", token: t.token, org: t.orgId, json });
const remove = (t: Member, id: string) => h.request(`/api/servers/${id}`, { method: "DELETE", token: t.token, org: t.orgId });
const heartbeat = (token: string, json: unknown = {}) => h.request("/api/runner/heartbeat", { method: "POST", token, json });
const serverCount = async (orgId: string) => (await h.db.select().from(servers).where(eq(servers.orgId, orgId))).length;

describe("build servers: registration", () => {
  it("answers the runner token once; later reads, the list and the table never carry it", async () => {
    const t = await seedTenant(h);
    const created = await registered(t, { labels: ["gpu", "region=eu", "gpu"], publicUrl: "https://build-1.example.com" });
    expect(created.token).toMatch(/^wsr_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({
      name: "build-1",
      labels: ["gpu", "region=eu"],
      publicUrl: "https://build-1.example.com",
      status: "offline",
      draining: false,
      version: null,
      capacity: null,
      lastSeenAt: null,
      running: [],
      createdBy: t.userId,
    });
    expect(created.id).toMatch(/^srv_/);
    expect(created.token.startsWith(created.tokenPrefix)).toBe(true);

    const one = await expectBody(await read(t, created.id), 200, ServerSchema);
    const list = await listOf(t);
    expect(list.items.map((s) => s.id)).toEqual([created.id]);
    const { token, ...withoutToken } = created;
    expect(one).toEqual(withoutToken);
    // Canary: the token's secret part appears in no later answer and in no table.
    const secret = token.slice(created.tokenPrefix.length);
    const renamed = await patch(t, created.id, { name: "renamed" });
    const beat = await heartbeat(token, { version: "1.0.0" });
    for (const res of [JSON.stringify(one), JSON.stringify(list), await renamed.text(), await beat.text()]) expect(res).not.toContain(secret);
    expect(await storedIn(h, secret)).toEqual([]);
    expect(h.logs.join("\n")).not.toContain(secret);
  });

  it("members and viewers read; only admins register, change and delete (403, nothing written)", async () => {
    const t = await seedTenant(h);
    const s = await registered(t);
    const admin = await seedMember(h, t.orgId, "admin");
    for (const role of ["member", "viewer"] as const) {
      const m = await seedMember(h, t.orgId, role);
      expect((await listOf(m)).items.map((x) => x.id)).toEqual([s.id]);
      await expectBody(await read(m, s.id), 200, ServerSchema);
      await expectProblem(await register(m, { name: "nope" }), 403);
      await expectProblem(await patch(m, s.id, { name: "nope", draining: true }), 403);
      await expectProblem(await remove(m, s.id), 403);
    }
    expect(await serverCount(t.orgId)).toBe(1);
    expect(await expectBody(await read(t, s.id), 200, ServerSchema)).toMatchObject({ name: "build-1", draining: false });
    await registered(admin, { name: "by-admin" });
    expect(await serverCount(t.orgId)).toBe(2);
  });

  it("another organization's server answers 404 on GET, PATCH and DELETE and stays as it was", async () => {
    const owner = await seedTenant(h);
    const outsider = await seedTenant(h);
    const s = await registered(owner);
    const before = await expectBody(await read(owner, s.id), 200, ServerSchema);
    await expectProblem(await read(outsider, s.id), 404);
    await expectProblem(await patch(outsider, s.id, { name: "taken", draining: true }), 404);
    await expectProblem(await remove(outsider, s.id), 404);
    expect((await listOf(outsider)).items).toEqual([]);
    expect(await expectBody(await read(owner, s.id), 200, ServerSchema)).toEqual(before);
    await expectStatus(await heartbeat(s.token), 200);
  });

  it("bad input is 400 naming the field, and nothing is written", async () => {
    const t = await seedTenant(h);
    const cases: Array<[unknown, string]> = [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: "x".repeat(101) }, "name"],
      [{ name: "ok", labels: "gpu" }, "labels"],
      [{ name: "ok", labels: [1] }, "labels.0"],
      [{ name: "ok", labels: ["has space"] }, "labels.0"],
      [{ name: "ok", labels: Array.from({ length: 21 }, (_, i) => `l${i}`) }, "labels"],
      [{ name: "ok", publicUrl: "not a url" }, "publicUrl"],
      [{ name: "ok", publicUrl: "ftp://build.example.com" }, "publicUrl"],
      [{ name: "ok", publicUrl: "https://user:pass@build.example.com" }, "publicUrl"],
      [{ name: "ok", token: "wsr_mine" }, "token"],
    ];
    for (const [body, field] of cases) await expectProblem(await register(t, body), 400, field);
    expect(await serverCount(t.orgId)).toBe(0);

    const s = await registered(t);
    const before = await expectBody(await read(t, s.id), 200, ServerSchema);
    for (const [body, field] of [
      [{ name: "" }, "name"],
      [{ labels: [true] }, "labels.0"],
      [{ publicUrl: "javascript:alert(1)" }, "publicUrl"],
      [{ draining: "yes" }, "draining"],
      [{ status: "online" }, "status"],
    ] as Array<[unknown, string]>) {
      await expectProblem(await patch(t, s.id, body), 400, field);
    }
    expect(await expectBody(await read(t, s.id), 200, ServerSchema)).toEqual(before);
  });
});

describe("build servers: status, drain, delete", () => {
  it("a heartbeat makes the server online with what it reports; drain makes it draining, undrain online again", async () => {
    const t = await seedTenant(h);
    const s = await registered(t);
    const beat = await expectBody(
      await heartbeat(s.token, { version: "0.9.1", capacity: 4, sandbox: { bubblewrap: true, cgroups: "v1" }, limits: { memoryMb: 2048 } }),
      200,
      HeartbeatAnswerSchema,
    );
    expect(beat).toEqual({ serverId: s.id, status: "online", draining: false });
    const online = await expectBody(await read(t, s.id), 200, ServerSchema);
    expect(online).toMatchObject({ status: "online", version: "0.9.1", capacity: 4, sandbox: { bubblewrap: true, cgroups: "v1" }, limits: { memoryMb: 2048 } });
    expect(online.lastSeenAt).not.toBeNull();

    const drained = await expectBody(await patch(t, s.id, { draining: true }), 200, ServerSchema);
    expect(drained).toMatchObject({ status: "draining", draining: true });
    expect((await listOf(t)).items[0]).toMatchObject({ status: "draining" });
    expect(await expectBody(await heartbeat(s.token), 200, HeartbeatAnswerSchema)).toEqual({ serverId: s.id, status: "draining", draining: true });
    // Omitted fields keep their last reported value.
    expect(await expectBody(await read(t, s.id), 200, ServerSchema)).toMatchObject({ version: "0.9.1", capacity: 4 });
    expect(await expectBody(await patch(t, s.id, { draining: false }), 200, ServerSchema)).toMatchObject({ status: "online", draining: false });

    // Not heard from for a minute: offline (drained or not).
    await h.db
      .update(servers)
      .set({ lastSeenAt: new Date(Date.now() - 61_000), draining: true })
      .where(eq(servers.id, s.id));
    expect(await expectBody(await read(t, s.id), 200, ServerSchema)).toMatchObject({ status: "offline", draining: true });
  });

  it("PATCH renames, sets labels and the public URL (null clears it)", async () => {
    const t = await seedTenant(h);
    const s = await registered(t, { publicUrl: "http://10.0.0.5:8080" });
    const changed = await expectBody(await patch(t, s.id, { name: "renamed", labels: ["arm64"], publicUrl: null }), 200, ServerSchema);
    expect(changed).toMatchObject({ name: "renamed", labels: ["arm64"], publicUrl: null });
    expect(await expectBody(await read(t, s.id), 200, ServerSchema)).toEqual(changed);
  });

  it("delete revokes the token at once, hands its build back to the queue and fails the apps it served, saying why", async () => {
    const t = await seedTenant(h);
    const s = await registered(t);
    const other = await registered(t, { name: "build-2" });
    await expectStatus(await heartbeat(s.token), 200);
    const p = await createProject(t);
    const building = await addDeployment(p, "queued", "production");
    await markStatus(h.db, building.id, "building", new Date());
    await h.db
      .update(deployments)
      .set({ claimedBy: s.id, leaseExpiresAt: new Date(Date.now() + 30_000) })
      .where(eq(deployments.id, building.id));
    const served = await addDeployment(p, "ready", "production");
    await h.db.update(deployments).set({ servedBy: s.id }).where(eq(deployments.id, served.id));

    const listed = await expectBody(await read(t, s.id), 200, ServerSchema);
    expect(listed.running).toEqual([
      { id: building.id, projectId: p.id, status: "building" },
      { id: served.id, projectId: p.id, status: "ready" },
    ]);

    const deleted = await expectBody(await remove(t, s.id), 200, DeletedServerSchema);
    expect(deleted).toEqual({ id: s.id, requeued: [building.id], stopped: [served.id] });
    // Refused from the very next request on.
    await expectProblem(await heartbeat(s.token), 401);
    await expectProblem(await read(t, s.id), 404);
    await expectProblem(await remove(t, s.id), 404);
    expect((await listOf(t)).items.map((x) => x.id)).toEqual([other.id]);

    const requeued = await expectBody(await h.request(`/api/deployments/${building.id}`, { token: t.token }), 200, DeploymentSchema);
    expect(requeued.status).toBe("queued");
    // The helper writes the row without its creation's transition: the claim, then the hand-back.
    expect(requeued.transitions.map((x) => x.status)).toEqual(["building", "queued"]);
    const [row] = await h.db.select().from(deployments).where(eq(deployments.id, building.id));
    expect(row).toMatchObject({ claimedBy: null, leaseExpiresAt: null });

    const stopped = await expectBody(await h.request(`/api/deployments/${served.id}`, { token: t.token }), 200, DeploymentSchema);
    expect(stopped).toMatchObject({ status: "failed", current: false });
    expect(stopped.failureReason).toContain(`'build-1' (${s.id})`);
    expect(stopped.failureReason).toMatch(/was deleted/);
    // The app that was running is announced, as a crash is.
    const events = await h.db.select().from(notificationEvents).where(eq(notificationEvents.orgId, t.orgId));
    expect(events.map((e) => [e.category, e.projectId, (e.data as { deploymentId: string }).deploymentId])).toEqual([["service.crashed", p.id, served.id]]);
    expect(events[0]!.message).toBe(stopped.failureReason);
    // The other server and its token are untouched.
    await expectStatus(await heartbeat(other.token), 200);
  });
});

describe("build servers: the runner token", () => {
  it("is refused (403) on user routes, and a user's token on the runner protocol", async () => {
    const t = await seedTenant(h);
    const s = await registered(t);
    for (const [path, init] of [
      ["/api/projects", {}],
      ["/api/servers", {}],
      [`/api/servers/${s.id}`, {}],
      ["/api/me", {}],
      ["/api/settings", {}],
      ["/api/projects", { method: "POST", json: { name: "by runner" } }],
      [`/api/servers/${s.id}`, { method: "DELETE" }],
    ] as Array<[string, { method?: string; json?: unknown }]>) {
      const problem = await expectProblem(await h.request(path, { token: s.token, ...init }), 403);
      expect(problem.detail, path).toMatch(/runner token .* only works on the runner protocol/);
    }
    expect(await serverCount(t.orgId)).toBe(1);
    const refused = await expectProblem(await heartbeat(t.token), 403);
    expect(refused.detail).toMatch(/runner token/);
    // Pinned to its organization: a header naming another one is refused.
    const other = await seedTenant(h);
    await expectProblem(await h.request("/api/runner/heartbeat", { method: "POST", token: s.token, org: other.orgId, json: {} }), 403);
    await expectProblem(await heartbeat(s.token, { capacity: -1 }), 400, "capacity");
    await expectProblem(await heartbeat(s.token, { hostname: "x" }), 400, "hostname");
    await expectProblem(await heartbeat(`${s.token.slice(0, -2)}xx`), 401);
  });
});

describe("build servers: rate limits", () => {
  it("registrations per organization and heartbeats per server answer 429 with Retry-After past their limit, writing nothing", async () => {
    const t = await seedTenant(h);
    const s = await registered(t);
    for (let i = 1; i < SERVER_LIMITS.registrationsPerOrg.max; i++) await registered(t, { name: `build-${i}` });
    const refused = await register(t, { name: "one too many" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    await expectProblem(refused, 429);
    expect(await serverCount(t.orgId)).toBe(SERVER_LIMITS.registrationsPerOrg.max);

    for (let i = 0; i < SERVER_LIMITS.heartbeatsPerServer.max; i++) await expectStatus(await heartbeat(s.token, { version: "1" }), 200);
    const tooMany = await heartbeat(s.token, { version: "2" });
    expect(Number(tooMany.headers.get("retry-after"))).toBeGreaterThan(0);
    await expectProblem(tooMany, 429);
    expect(await expectBody(await read(t, s.id), 200, ServerSchema)).toMatchObject({ version: "1" });
  });
});

describe("build servers: Settings' defaultServerId", () => {
  const deployDefaults = (t: Member, json: unknown) => h.request("/api/settings/deploy-defaults", { method: "PATCH", token: t.token, org: t.orgId, json });

  it("must name a server of the organization (400 naming defaultServerId); null clears it", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const mine = await registered(t);
    const foreign = await registered(other);
    for (const id of [foreign.id, "srv_unknown"]) {
      await expectProblem(await deployDefaults(t, { defaultDeployTarget: "server", defaultServerId: id }), 400, "defaultServerId");
    }
    expect(await expectStatus(await h.request("/api/settings", { token: t.token }), 200)).toMatchObject({ defaultDeployTarget: null, defaultServerId: null });
    expect(await expectStatus(await deployDefaults(t, { defaultDeployTarget: "server", defaultServerId: mine.id }), 200)).toMatchObject({
      defaultDeployTarget: "server",
      defaultServerId: mine.id,
    });
    expect(await expectStatus(await deployDefaults(t, { defaultDeployTarget: null, defaultServerId: null }), 200)).toMatchObject({
      defaultDeployTarget: null,
      defaultServerId: null,
    });
  });

  it("a server deleted later leaves the setting pointing nowhere", async () => {
    const t = await seedTenant(h);
    const s = await registered(t);
    await expectStatus(await deployDefaults(t, { defaultDeployTarget: "server", defaultServerId: s.id }), 200);
    await expectStatus(await remove(t, s.id), 200);
    expect(await expectStatus(await h.request("/api/settings", { token: t.token }), 200)).toMatchObject({ defaultServerId: s.id });
  });
});
