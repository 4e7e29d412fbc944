/** Lifecycle (functions/projects/lifecycle.ts): enable, disable, routing/retry, and the status deployments give. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { EnvironmentSchema } from "../../../functions/projects/environments";
import { InfoSchema } from "../../../functions/projects/info";
import { FreeRouteSchema, ProjectSchema } from "../../../functions/projects/schema";
import { deployments, projects } from "../../../shared/db/schema";
import { expectBody, expectProblem, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get, addDeployment } = projectHelpers(h);

describe("projects: status and routing", () => {
  it("disable and enable toggle the status and the free route; repeating either is harmless", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const disabled = await expectBody(await call(t, `/${p.id}/disable`, { method: "POST" }), 200, ProjectSchema);
    expect(disabled).toMatchObject({ status: "disabled", routes: { free: { state: "offline" } } });
    expect(disabled.disabledAt).toEqual(expect.any(String));
    const again = await expectBody(await call(t, `/${p.id}/disable`, { method: "POST" }), 200, ProjectSchema);
    expect(again).toEqual(disabled);

    const enabled = await expectBody(await call(t, `/${p.id}/enable`, { method: "POST" }), 200, ProjectSchema);
    expect(enabled).toMatchObject({ status: "created", disabledAt: null, routes: { free: { state: "synced" } } });
    const enabledAgain = await expectBody(await call(t, `/${p.id}/enable`, { method: "POST", json: {} }), 200, ProjectSchema);
    expect(enabledAgain).toEqual(enabled);
  });

  it("a ready production deployment makes the project live; disable and enable keep that history", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await addDeployment(p, "failed");
    expect((await get(t, p.id)).status).toBe("created");
    const ready = await addDeployment(p, "ready");
    const failed = await addDeployment(p, "failed");
    const live = await get(t, p.id);
    expect(live.status).toBe("live");
    expect(live.latestDeployment).toMatchObject({ id: failed.id, status: "failed" });
    expect((await expectBody(await call(t, `/${p.id}/disable`, { method: "POST" }), 200, ProjectSchema)).status).toBe("disabled");
    expect((await expectBody(await call(t, `/${p.id}/enable`, { method: "POST" }), 200, ProjectSchema)).status).toBe("live");
    const info = await expectBody(await call(t, `/${p.id}/info`), 200, InfoSchema);
    expect(info.runtime.serving?.id).toBe(ready.id);
  });

  it("never live while nothing answers: degraded while the current app is down, crashed once it was stopped, each with the reason; asleep is live", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const ready = await addDeployment(p, "ready");
    expect(await get(t, p.id)).toMatchObject({ status: "live", statusReason: null });

    // A crash: the runner takes the app's port off until it answers again.
    await h.db.update(deployments).set({ port: null }).where(eq(deployments.id, ready.id));
    const down = await get(t, p.id);
    expect(down.status).toBe("degraded");
    expect(down.statusReason).toContain(ready.id);
    expect(down.statusReason).toMatch(/does not answer now/);

    await h.db.update(deployments).set({ crashedAt: new Date() }).where(eq(deployments.id, ready.id));
    const crashed = await get(t, p.id);
    expect(crashed.status).toBe("crashed");
    expect(crashed.statusReason).toMatch(new RegExp(`^The app of deployment ${ready.id} crashed more often than the restart policy allows`));
    // Disabled wins, and says no more.
    expect(await expectBody(await call(t, `/${p.id}/disable`, { method: "POST" }), 200, ProjectSchema)).toMatchObject({
      status: "disabled",
      statusReason: null,
    });
    await expectBody(await call(t, `/${p.id}/enable`, { method: "POST" }), 200, ProjectSchema);

    // Asleep (auto_sleep): stopped on purpose, the next request wakes it.
    await h.db.update(deployments).set({ crashedAt: null, asleepAt: new Date() }).where(eq(deployments.id, ready.id));
    expect(await get(t, p.id)).toMatchObject({ status: "live", statusReason: null, asleep: true });
  });

  it("a ready preview deployment alone does not make the project live", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201, EnvironmentSchema);
    await addDeployment(p, "ready", "staging");
    expect((await get(t, p.id)).status).toBe("created");
  });

  it("routing/retry re-syncs the free route and records the attempt, without a build; 409 while disabled", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const before = Date.now();
    const route = await expectBody(await call(t, `/${p.id}/routing/retry`, { method: "POST" }), 200, FreeRouteSchema);
    expect(route).toMatchObject({ hostname: p.routes.free.hostname, state: "synced" });
    expect(new Date(route.lastAttemptAt!).getTime()).toBeGreaterThanOrEqual(before - 5000);
    expect(route.syncedAt).toBe(route.lastAttemptAt);
    expect((await get(t, p.id)).routes.free).toEqual(route);
    const [row] = await h.db.select().from(projects).where(eq(projects.id, p.id));
    expect(row!.routingHost).toBe(p.routes.free.hostname);
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, p.id))).toEqual([]);

    // A host synced under another shared domain reads pending until retried.
    await h.db
      .update(projects)
      .set({ routingHost: `${p.slug}.old-domain.test` })
      .where(eq(projects.id, p.id));
    expect((await get(t, p.id)).routes.free.state).toBe("pending");
    expect((await expectBody(await call(t, `/${p.id}/routing/retry`, { method: "POST" }), 200, FreeRouteSchema)).state).toBe("synced");

    await expectBody(await call(t, `/${p.id}/disable`, { method: "POST" }), 200, ProjectSchema);
    await expectProblem(await call(t, `/${p.id}/routing/retry`, { method: "POST" }), 409);
    expect((await get(t, p.id)).routes.free.state).toBe("offline");
  });

  it("enable, disable and routing/retry need project:write", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const viewer = await seedMember(h, t.orgId, "viewer");
    for (const path of ["enable", "disable", "routing/retry"]) await expectProblem(await call(viewer, `/${p.id}/${path}`, { method: "POST" }), 403);
    expect((await get(t, p.id)).status).toBe("created");
  });
});
