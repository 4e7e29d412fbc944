/** Notifications (functions/notifications/deliveries.ts): the in-app feed, unseen counts and seen marks. */
import { describe, expect, it } from "vitest";
import { expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { type Json, notificationsHelpers } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, emit } = notificationsHelpers(h);

describe("notifications: feed", () => {
  it("lists newest first with unseen, limit and cursor; seen is idempotent and the count drops", async () => {
    const t = await seedTenant(h);
    for (let i = 1; i <= 3; i++) await emit(t, { category: "deploy.failed", title: `failure ${i}` });
    const all = await expectStatus(await get(t.token, "/deliveries"), 200);
    expect(all.items.map((d: Json) => d.title)).toEqual(["failure 3", "failure 2", "failure 1"]);
    expect(all.nextCursor).toBeNull();

    const page = await expectStatus(await get(t.token, "/deliveries?limit=2"), 200);
    expect(page.items).toHaveLength(2);
    const rest = await expectStatus(await get(t.token, `/deliveries?limit=2&cursor=${page.nextCursor}`), 200);
    expect(rest.items.map((d: Json) => d.title)).toEqual(["failure 1"]);

    expect((await expectStatus(await get(t.token, "/deliveries/unseen-count"), 200)).count).toBe(3);
    const target = all.items[1];
    const seen = await expectStatus(await send("POST", t.token, `/deliveries/${target.id}/seen`), 200);
    expect(seen).toMatchObject({ id: target.id, seen: true });
    expect(seen.seenAt).toEqual(expect.any(String));
    const repeat = await expectStatus(await send("POST", t.token, `/deliveries/${target.id}/seen`), 200);
    expect(repeat.seenAt).toBe(seen.seenAt);
    expect((await expectStatus(await get(t.token, "/deliveries/unseen-count"), 200)).count).toBe(2);

    const unseen = await expectStatus(await get(t.token, "/deliveries?unseen=true"), 200);
    expect(unseen.items.map((d: Json) => d.title)).toEqual(["failure 3", "failure 1"]);
    const seenOnly = await expectStatus(await get(t.token, "/deliveries?unseen=false"), 200);
    expect(seenOnly.items.map((d: Json) => d.title)).toEqual(["failure 2"]);
    const one = await expectStatus(await get(t.token, "/deliveries?unseen=true&limit=1"), 200);
    expect(one.items.map((d: Json) => d.title)).toEqual(["failure 3"]);

    const detail = await expectStatus(await get(t.token, `/deliveries/${target.id}`), 200);
    expect(detail).toMatchObject({ id: target.id, title: "failure 2", seen: true, sends: [] });

    await expectProblem(await get(t.token, "/deliveries?unseen=maybe"), 400, "unseen");
    await expectProblem(await get(t.token, "/deliveries?limit=101"), 400, "limit");
    await expectProblem(await get(t.token, "/deliveries?limit=abc"), 400, "limit");
  });
});
