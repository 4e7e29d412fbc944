/** Notifications (functions/notifications/subscriptions.ts): the member's grid, PUT and DELETE. */
import { describe, expect, it } from "vitest";
import { SubscriptionSchema } from "../../../functions/notifications/schema";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { type Json, notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, createChannel, subscriptions, inApp } = notificationsHelpers(h);

describe("notifications: subscriptions", () => {
  it("seeds a joining member's grid on an in_app channel from the categories' defaults", async () => {
    const t = await seedTenant(h);
    const categories = (await expectStatus(await get(t.token, "/categories"), 200)).items as Json[];
    const channel = await inApp(t);
    expect(channel).toMatchObject({ kind: "in_app", enabled: true, verified: true });
    const subs = await subscriptions(t);
    expect(subs).toHaveLength(categories.length);
    for (const cat of categories) {
      const s = subs.find((x) => x.category === cat.id)!;
      expect(s, cat.id).toMatchObject({ channelId: channel.id, enabled: cat.defaultEnabled });
    }
  });

  it("PUT is an idempotent upsert on (category, channel)", async () => {
    const t = await seedTenant(h);
    const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
    const body = { category: "backup.failed", channelId: c.id, enabled: true };
    const first = await expectBody(await send("PUT", t.token, "/subscriptions", body), 200, SubscriptionSchema);
    expect(first).toMatchObject(body);
    const second = await expectBody(await send("PUT", t.token, "/subscriptions", body), 200, SubscriptionSchema);
    expect(second.id).toBe(first.id);
    const off = await expectBody(await send("PUT", t.token, "/subscriptions", { ...body, enabled: false }), 200, SubscriptionSchema);
    expect(off).toMatchObject({ id: first.id, enabled: false });
    expect((await subscriptions(t)).filter((s) => s.channelId === c.id)).toHaveLength(1);
  });

  it("concurrent PUTs of the same cell leave exactly one row", async () => {
    const t = await seedTenant(h);
    const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => send("PUT", t.token, "/subscriptions", { category: "domain.expiring", channelId: c.id, enabled: i % 2 === 0 })),
    );
    const ids = new Set<string>();
    for (const r of results) ids.add((await expectStatus(r, 200)).id);
    expect(ids.size).toBe(1);
    const res = await h.db.execute(`select count(*)::int as n from notification_subscriptions where channel_id = '${c.id}'` as never);
    expect((res as unknown as { rows: { n: number }[] }).rows[0]!.n).toBe(1);
  });

  it("validates the body: category, channelId and a boolean enabled", async () => {
    const t = await seedTenant(h);
    const c = await inApp(t);
    const p = await expectProblem(
      await send("PUT", t.token, "/subscriptions", { category: "deploy.exploded", channelId: c.id, enabled: true }),
      400,
      "category",
    );
    expect(p.allowed).toContain("deploy.failed");
    await expectProblem(await send("PUT", t.token, "/subscriptions", { channelId: c.id, enabled: true }), 400, "category");
    await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", enabled: true }), 400, "channelId");
    await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id }), 400, "enabled");
    await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: "true" }), 400, "enabled");
    await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true, extra: 1 }), 400, "extra");
  });

  it("DELETE removes one subscription; a repeat is 404", async () => {
    const t = await seedTenant(h);
    const sub = (await subscriptions(t))[0]!;
    expect((await send("DELETE", t.token, `/subscriptions/${sub.id}`)).status).toBe(204);
    expect((await subscriptions(t)).some((s) => s.id === sub.id)).toBe(false);
    await expectProblem(await send("DELETE", t.token, `/subscriptions/${sub.id}`), 404);
  });

  it("a viewer manages their own channels and subscriptions", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    const c = await createChannel(viewer, { kind: "email", label: "mine", config: { address: "v@example.com" } });
    await expectBody(await send("PUT", viewer.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true }), 200, SubscriptionSchema);
  });
});
