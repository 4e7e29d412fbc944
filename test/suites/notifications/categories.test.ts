/** Notifications (functions/notifications/categories.ts): GET /api/notifications/categories. */
import { describe, expect, it } from "vitest";
import { expectStatus, seedMember, seedTenant } from "../../support/harness";
import { type Json, notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, emit, inApp } = notificationsHelpers(h);

/** The categories something in the service emits (the runner, a build server's deletion); the rest have no producer yet. */
const PRODUCED = ["build.failed", "deploy.failed", "deploy.succeeded", "service.crashed"];
const NOT_PRODUCED = [
  "backup.failed",
  "backup.succeeded",
  "certificate.expiring",
  "certificate.renewal_failed",
  "domain.expiring",
  "domain.misconfigured",
  "member.joined",
  "usage.limit_approaching",
];

describe("notifications: categories", () => {
  it("lists the static registry, readable by a viewer", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    const body = await expectStatus(await get(viewer.token, "/categories"), 200);
    const ids = body.items.map((c: Json) => c.id);
    for (const id of ["deploy.failed", "deploy.succeeded", "build.failed", "backup.failed", "domain.expiring", "certificate.expiring"]) {
      expect(ids).toContain(id);
    }
    for (const c of body.items) {
      expect(Object.keys(c).sort()).toEqual(["available", "defaultEnabled", "description", "id", "label", "reason"]);
      expect(typeof c.defaultEnabled).toBe("boolean");
      expect(c.label.length).toBeGreaterThan(0);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("marks the categories nothing produces yet as unavailable, with a reason, and off by default", async () => {
    const t = await seedTenant(h);
    const { items } = await expectStatus(await get(t.token, "/categories"), 200);
    const available = items.filter((c: Json) => c.available).map((c: Json) => c.id);
    expect(available.sort()).toEqual(PRODUCED);
    expect(
      items
        .filter((c: Json) => !c.available)
        .map((c: Json) => c.id)
        .sort(),
    ).toEqual(NOT_PRODUCED);
    for (const c of items) {
      if (c.available) expect(c.reason, c.id).toBeNull();
      else {
        expect(c.reason, c.id).toMatch(/Nothing in the service produces this yet/);
        expect(c.defaultEnabled, c.id).toBe(false);
        expect(c.description, c.id).toMatch(/^Would be sent when /);
      }
    }
    // The organization's defaults (what a new member's grid starts with) follow: an unproduced category is off.
    const defaults = await expectStatus(await get(t.token, "/defaults"), 200);
    for (const id of NOT_PRODUCED)
      expect(
        defaults.items.find((d: Json) => d.category === id),
        id,
      ).toMatchObject({ defaultEnabled: false, overridden: false });
  });

  it("still takes an unproduced category in a subscription and from the events route (a team's own producer)", async () => {
    const t = await seedTenant(h);
    const channel = await inApp(t);
    const sub = await expectStatus(await send("PUT", t.token, "/subscriptions", { category: "backup.failed", channelId: channel.id, enabled: true }), 200);
    expect(sub).toMatchObject({ category: "backup.failed", enabled: true });
    const event = await emit(t, { category: "backup.failed", title: "Nightly backup failed" });
    expect(event.recipients).toBe(1);
  });
});
