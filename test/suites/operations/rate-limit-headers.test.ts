/**
 * RateLimit-* headers (functions/notifications/rate-limit.ts, takeApiLimits): every answer of a
 * rate-limited operation carries RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset of its
 * tightest limit; a 429 adds Retry-After, equal to RateLimit-Reset.
 */
import { describe, expect, it } from "vitest";
import { newId } from "../../../shared/ids";
import { expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { useNotificationsEnv } from "../../support/notifications-env";

const { h } = useNotificationsEnv();

function limitOf(res: Response) {
  return {
    limit: Number(res.headers.get("ratelimit-limit")),
    remaining: Number(res.headers.get("ratelimit-remaining")),
    reset: Number(res.headers.get("ratelimit-reset")),
  };
}

describe("RateLimit headers", () => {
  it("POST /api/auth/login: present and decreasing, then 429 with Retry-After equal to RateLimit-Reset", async () => {
    // An address without an account counts alike (the answer never tells).
    const email = `${newId("u")}@example.test`;
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await h.request("/api/auth/login", { json: { email } });
      await expectStatus(res, 202);
      const l = limitOf(res);
      expect(l.limit).toBe(5);
      expect(l.reset).toBeGreaterThan(3500);
      expect(l.reset).toBeLessThanOrEqual(3600);
      seen.push(l.remaining);
    }
    expect(seen).toEqual([4, 3, 2, 1, 0]);
    const refused = await h.request("/api/auth/login", { json: { email } });
    await expectProblem(refused, 429);
    const l = limitOf(refused);
    expect(l).toMatchObject({ limit: 5, remaining: 0 });
    expect(Number(refused.headers.get("retry-after"))).toBe(l.reset);
  });

  it("POST /api/auth/verify: the wrong tries left", async () => {
    const email = `${newId("u")}@example.test`;
    const first = await h.request("/api/auth/verify", { json: { email, code: "000000" } });
    await expectProblem(first, 400, "code");
    const second = await h.request("/api/auth/verify", { json: { email, code: "000000" } });
    await expectProblem(second, 400, "code");
    expect(limitOf(first)).toMatchObject({ limit: 20, remaining: 19 });
    expect(limitOf(second)).toMatchObject({ limit: 20, remaining: 18 });
    expect(limitOf(second).reset).toBeGreaterThan(23 * 3600);
  });

  it("POST /api/servers: the organization's registrations left; an unlimited operation has none", async () => {
    const t = await seedTenant(h);
    const a = await h.request("/api/servers", { token: t.token, json: { name: "one" } });
    await expectStatus(a, 201);
    const b = await h.request("/api/servers", { token: t.token, json: { name: "two" } });
    await expectStatus(b, 201);
    expect(limitOf(a)).toMatchObject({ limit: 30, remaining: 29 });
    expect(limitOf(b)).toMatchObject({ limit: 30, remaining: 28 });
    const list = await h.request("/api/servers", { token: t.token });
    await expectStatus(list, 200);
    expect(list.headers.get("ratelimit-limit")).toBeNull();
  });
});
