/** Notifications: another member's or another organization's channels, subscriptions, defaults and deliveries. */
import { describe, expect, it } from "vitest";
import { OrgDefaultSchema } from "../../../functions/notifications/schema";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { type Json, notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, createChannel, channels, subscriptions, emit, inApp, notFoundBody } = notificationsHelpers(h);

describe("notifications: ownership and isolation", () => {
  it("another member's channel, subscription and delivery answer 404 exactly like unknown ids", async () => {
    const t = await seedTenant(h);
    const other = await seedMember(h, t.orgId, "admin");
    const theirs = await createChannel(other, { kind: "email", label: "theirs", config: { address: "o@example.com" } });
    const theirSub = (await subscriptions(other))[0]!;
    await emit(t, { category: "deploy.failed", title: "to everyone" });
    const theirDelivery = (await expectStatus(await get(other.token, "/deliveries"), 200)).items[0];
    expect(theirDelivery).toBeDefined();

    const unknown = {
      channel: newId("nch"),
      subscription: newId("nsub"),
      delivery: newId("ndlv"),
    };
    const pairs: Array<[string, string, string, unknown?]> = [
      ["PATCH", `/channels/${theirs.id}`, `/channels/${unknown.channel}`, { label: "mine now" }],
      ["DELETE", `/channels/${theirs.id}`, `/channels/${unknown.channel}`],
      ["POST", `/channels/${theirs.id}/test`, `/channels/${unknown.channel}/test`],
      ["DELETE", `/subscriptions/${theirSub.id}`, `/subscriptions/${unknown.subscription}`],
      ["POST", `/deliveries/${theirDelivery.id}/seen`, `/deliveries/${unknown.delivery}/seen`],
      ["GET", `/deliveries/${theirDelivery.id}`, `/deliveries/${unknown.delivery}`],
    ];
    for (const [method, foreign, missing, json] of pairs) {
      const a = await notFoundBody(await send(method, t.token, foreign, json));
      const b = await notFoundBody(await send(method, t.token, missing, json));
      expect(a, `${method} ${foreign}`).toEqual(b);
    }
    // Nothing of theirs changed.
    expect((await channels(other)).find((c) => c.id === theirs.id)).toMatchObject({ label: "theirs" });
    expect((await subscriptions(other)).some((s) => s.id === theirSub.id)).toBe(true);
    expect((await expectStatus(await get(other.token, "/deliveries/unseen-count"), 200)).count).toBe(1);
    // And the lists show only one's own.
    expect((await channels(t)).some((c) => c.id === theirs.id)).toBe(false);
    expect((await subscriptions(t)).every((s) => s.channelId !== theirSub.channelId)).toBe(true);
  });

  it("a subscription cannot point at another member's channel or an unknown one", async () => {
    const t = await seedTenant(h);
    const other = await seedMember(h, t.orgId, "member");
    const theirs = await inApp(other);
    for (const channelId of [theirs.id, newId("nch")]) {
      const p = await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId, enabled: true }), 400, "channelId");
      expect(p.detail).toContain("not one of your channels");
    }
    expect((await subscriptions(other)).filter((s) => s.category === "deploy.failed")).toHaveLength(1);
  });

  it("separates organizations: channels, subscriptions, defaults and the feed are per organization", async () => {
    const a = await seedTenant(h);
    const org2 = await expectStatus(await h.request("/api/orgs", { token: a.token, json: { name: "second" } }), 201);
    const c1 = await createChannel(a, { kind: "email", label: "org1", config: { address: "a@example.com" } });
    const in2 = await channels(a, org2.id);
    expect(in2.map((c) => c.kind)).toEqual(["in_app"]);
    await expectProblem(await send("PATCH", a.token, `/channels/${c1.id}`, { label: "x" }, org2.id), 404);
    await expectProblem(
      await send("PUT", a.token, "/subscriptions", { category: "deploy.failed", channelId: c1.id, enabled: true }, org2.id),
      400,
      "channelId",
    );

    await expectBody(await send("PUT", a.token, "/defaults", { category: "member.joined", defaultEnabled: true }, org2.id), 200, OrgDefaultSchema);
    const d1 = (await expectStatus(await get(a.token, "/defaults"), 200)).items.find((d: Json) => d.category === "member.joined");
    expect(d1).toEqual({ category: "member.joined", defaultEnabled: false, overridden: false });

    await emit(a, { category: "deploy.failed", title: "in org 2" }, org2.id);
    expect((await expectStatus(await get(a.token, "/deliveries/unseen-count"), 200)).count).toBe(0);
    expect((await expectStatus(await get(a.token, "/deliveries/unseen-count", org2.id), 200)).count).toBe(1);
    const entry = (await expectStatus(await get(a.token, "/deliveries", org2.id), 200)).items[0];
    await expectProblem(await send("POST", a.token, `/deliveries/${entry.id}/seen`), 404);

    // A stranger sees nothing and cannot name the organization.
    const stranger = await seedTenant(h);
    await expectProblem(await get(stranger.token, "/channels", a.orgId), 403);
    await expectProblem(await send("PATCH", stranger.token, `/channels/${c1.id}`, { label: "x" }), 404);
  });
});
