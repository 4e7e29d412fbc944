/** Notifications (functions/notifications/events.ts): POST /api/notifications/events and its fan-out. */
import { describe, expect, it } from "vitest";
import { ChannelSchema, SubscriptionSchema } from "../../../functions/notifications/schema";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, subscriptions, emit, inApp } = notificationsHelpers(h);

describe("notifications: events", () => {
  it("fans an event out to members with an enabled subscription on an enabled, verified channel", async () => {
    const t = await seedTenant(h);
    const yes = await seedMember(h, t.orgId, "member");
    const unsubscribed = await seedMember(h, t.orgId, "viewer");
    const deployFailedOnly = await seedMember(h, t.orgId, "viewer");
    const disabledChannel = await seedMember(h, t.orgId, "member");
    const outsider = await seedTenant(h);

    const disable = async (m: typeof t, category: string) => {
      const sub = (await subscriptions(m)).find((s) => s.category === category)!;
      await expectBody(await send("PUT", m.token, "/subscriptions", { category, channelId: sub.channelId, enabled: false }), 200, SubscriptionSchema);
    };
    // A build failure is a deployment that failed: "Deploy failed" alone hears of it; neither category, nothing.
    await disable(unsubscribed, "build.failed");
    await disable(unsubscribed, "deploy.failed");
    await disable(deployFailedOnly, "build.failed");
    const bell = await inApp(disabledChannel);
    await expectBody(await send("PATCH", disabledChannel.token, `/channels/${bell.id}`, { enabled: false }), 200, ChannelSchema);

    const result = await emit(t, { category: "build.failed", title: "Build 42 failed", message: "exit code 1", projectId: "prj_1", data: { build: 42 } });
    expect(result).toMatchObject({ recipients: 3, sends: 0 });
    expect(result.eventId).toMatch(/^nevt_/);
    // Subscribed to both categories (the defaults): told once.
    for (const m of [t, yes, deployFailedOnly]) expect((await expectStatus(await get(m.token, "/deliveries/unseen-count"), 200)).count).toBe(1);
    for (const m of [unsubscribed, disabledChannel, outsider]) expect((await expectStatus(await get(m.token, "/deliveries/unseen-count"), 200)).count).toBe(0);

    const entry = (await expectStatus(await get(yes.token, "/deliveries"), 200)).items[0];
    expect(entry).toMatchObject({
      eventId: result.eventId,
      category: "build.failed",
      title: "Build 42 failed",
      message: "exit code 1",
      projectId: "prj_1",
      data: { build: 42 },
      seen: false,
      seenAt: null,
      sends: [],
    });

    // A category nobody subscribes to by default reaches nobody.
    expect(await emit(t, { category: "deploy.succeeded", title: "shipped" })).toMatchObject({ recipients: 0, sends: 0 });
  });

  it("deploy.failed does not reach a build.failed-only subscriber; terminal escapes are not stored", async () => {
    const t = await seedTenant(h);
    const buildsOnly = await seedMember(h, t.orgId, "member");
    const sub = (await subscriptions(buildsOnly)).find((s) => s.category === "deploy.failed")!;
    await expectBody(
      await send("PUT", buildsOnly.token, "/subscriptions", { category: "deploy.failed", channelId: sub.channelId, enabled: false }),
      200,
      SubscriptionSchema,
    );
    const esc = "\u001b";
    const result = await emit(t, {
      category: "deploy.failed",
      title: `${esc}[1mDeploy failed${esc}[22m`,
      message: `start failed:\n${esc}[31mError: listen EADDRINUSE${esc}[39m ${esc}]8;;https://x.test\u0007link${esc}]8;;\u0007`,
      data: { reason: `${esc}[33mwarn${esc}[0m`, nested: [{ line: `a${esc}b` }] },
    });
    expect(result).toMatchObject({ recipients: 1 });
    expect((await expectStatus(await get(buildsOnly.token, "/deliveries/unseen-count"), 200)).count).toBe(0);
    const entry = (await expectStatus(await get(t.token, "/deliveries"), 200)).items[0];
    expect(entry).toMatchObject({
      title: "Deploy failed",
      message: "start failed:\nError: listen EADDRINUSE link",
      data: { reason: "warn", nested: [{ line: "a" }] },
    });
  });

  it("a removed member is not told", async () => {
    const t = await seedTenant(h);
    const gone = await seedMember(h, t.orgId, "member");
    expect((await h.request(`/api/orgs/${t.orgId}/members/${gone.userId}`, { method: "DELETE", token: t.token })).status).toBe(204);
    expect(await emit(t, { category: "deploy.failed", title: "after removal" })).toMatchObject({ recipients: 1 });
  });

  it("validates events and needs notifications:admin", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    await expectProblem(await send("POST", member.token, "/events", { category: "deploy.failed", title: "x" }), 403);
    await expectProblem(await send("POST", t.token, "/events", { category: "deploy.kaboom", title: "x" }), 400, "category");
    await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed" }), 400, "title");
    await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: " " }), 400, "title");
    await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: "x", data: [1] }), 400, "data");
    await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: "x", data: { big: "x".repeat(17_000) } }), 400, "data");
    await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: "x", severity: "high" }), 400, "severity");
    expect((await expectStatus(await get(t.token, "/deliveries/unseen-count"), 200)).count).toBe(0);
  });
});
