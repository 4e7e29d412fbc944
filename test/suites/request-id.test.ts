/**
 * Every answer names its request: `x-request-id` on successes and problems alike, the
 * same id a problem carries as `requestId` (and the server log as `requestId`), a new
 * one per request. Headers a route sets itself are kept beside it.
 */
import { describe, expect, it } from "vitest";
import { expectProblem, expectStatus, seedTenant } from "../support/harness";
import { useRuntimeHarness } from "../support/runtime";

const REQUEST_ID = /^req_[0-9a-z]{26}$/;

const h = useRuntimeHarness();
describe("request ids", () => {
  it("a problem's requestId is its x-request-id; every request gets its own", async () => {
    const first = await h.request("/api/settings");
    const second = await h.request("/api/no-such-route");
    const a = await expectProblem(first, 401);
    const b = await expectProblem(second, 404);
    expect(first.headers.get("x-request-id")).toMatch(REQUEST_ID);
    expect(a.requestId).toBe(first.headers.get("x-request-id"));
    expect(b.requestId).toBe(second.headers.get("x-request-id"));
    expect(a.requestId).not.toBe(b.requestId);
  });

  it("an authenticated answer carries it too, once, beside the route's own headers", async () => {
    const t = await seedTenant(h);
    const res = await h.request("/api/settings", { token: t.token, org: t.orgId });
    await expectStatus(res, 200);
    expect(res.headers.get("x-request-id")).toMatch(REQUEST_ID);
    const health = await h.request("/healthz");
    await expectStatus(health, 200);
    expect(health.headers.get("x-request-id")).toMatch(REQUEST_ID);
    expect(health.headers.get("cache-control")).toBe("no-store");
  });
});
