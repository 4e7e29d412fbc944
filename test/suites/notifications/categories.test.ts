/** Notifications (functions/notifications/categories.ts): GET /api/notifications/categories. */
import { describe, expect, it } from "vitest";
import { expectStatus, seedMember, seedTenant } from "../../support/harness";
import { type Json, notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get } = notificationsHelpers(h);

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
      expect(Object.keys(c).sort()).toEqual(["defaultEnabled", "description", "id", "label"]);
      expect(typeof c.defaultEnabled).toBe("boolean");
      expect(c.label.length).toBeGreaterThan(0);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });
});
