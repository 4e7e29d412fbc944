/** Notifications (functions/notifications/defaults.ts): the organization's defaults and the grids they seed. */
import { describe, expect, it } from "vitest";
import { OrgDefaultSchema } from "../../../functions/notifications/schema";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { type Json, notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, channels, subscriptions } = notificationsHelpers(h);

describe("notifications: org defaults", () => {
  it("reads with notifications:read, writes with notifications:admin", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    const member = await seedMember(h, t.orgId, "member");
    const list = await expectStatus(await get(viewer.token, "/defaults"), 200);
    const categories = (await expectStatus(await get(t.token, "/categories"), 200)).items as Json[];
    expect(list.items).toEqual(categories.map((c) => ({ category: c.id, defaultEnabled: c.defaultEnabled, overridden: false })));
    await expectProblem(await send("PUT", member.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 403);
    await expectProblem(await send("PUT", viewer.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 403);
    const put = await expectBody(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 200, OrgDefaultSchema);
    expect(put).toEqual({ category: "deploy.failed", defaultEnabled: false, overridden: true });
    const again = await expectBody(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 200, OrgDefaultSchema);
    expect(again).toEqual(put);
    const after = await expectStatus(await get(member.token, "/defaults"), 200);
    expect(after.items.find((d: Json) => d.category === "deploy.failed")).toEqual(put);
  });

  it("validates category and a boolean defaultEnabled", async () => {
    const t = await seedTenant(h);
    await expectProblem(await send("PUT", t.token, "/defaults", { category: "nope", defaultEnabled: true }), 400, "category");
    await expectProblem(await send("PUT", t.token, "/defaults", { defaultEnabled: true }), 400, "category");
    await expectProblem(await send("PUT", t.token, "/defaults", { category: "deploy.failed" }), 400, "defaultEnabled");
    await expectProblem(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: 1 }), 400, "defaultEnabled");
  });

  it("seed the grid of members who join afterwards (through an invitation too); existing grids are unchanged", async () => {
    const t = await seedTenant(h);
    const early = await seedMember(h, t.orgId, "member");
    await expectBody(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 200, OrgDefaultSchema);
    await expectBody(await send("PUT", t.token, "/defaults", { category: "deploy.succeeded", defaultEnabled: true }), 200, OrgDefaultSchema);

    const late = await seedMember(h, t.orgId, "member");
    const lateSubs = await subscriptions(late);
    expect(lateSubs.find((s) => s.category === "deploy.failed")!.enabled).toBe(false);
    expect(lateSubs.find((s) => s.category === "deploy.succeeded")!.enabled).toBe(true);
    expect(lateSubs.find((s) => s.category === "build.failed")!.enabled).toBe(true);
    const earlySubs = await subscriptions(early);
    expect(earlySubs.find((s) => s.category === "deploy.failed")!.enabled).toBe(true);

    const email = `${newId("inv")}@example.test`;
    const inv = await expectStatus(await h.request(`/api/orgs/${t.orgId}/invitations`, { token: t.token, json: { email, role: "viewer" } }), 201);
    const joined = await expectStatus(await h.request("/api/invitations/accept", { json: { code: inv.code, name: "Invited" } }), 200);
    const invited: Member = { userId: joined.user.id, email, token: joined.token, orgId: t.orgId };
    const invitedChannels = await channels(invited);
    expect(invitedChannels).toHaveLength(1);
    expect(invitedChannels[0]).toMatchObject({ kind: "in_app", verified: true, enabled: true });
    const invitedSubs = await subscriptions(invited);
    expect(invitedSubs.find((s) => s.category === "deploy.failed")!.enabled).toBe(false);
    expect(invitedSubs.find((s) => s.category === "deploy.succeeded")!.enabled).toBe(true);
  });
});
