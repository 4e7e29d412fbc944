/**
 * The edge's rule evaluation (functions/self-hosted/edge/rules.ts) remembers which rules match a path per
 * rules array: a path seen before is decided the same way, a reloaded rules array (a rule added, edited or
 * disabled: the table builds a new array) is matched afresh, every path form counts, and a ban's expiry is
 * read against the request's clock each time. Synchronous without rate limits; a lease grants at once.
 */
import { describe, expect, it } from "vitest";
import type { TakeOne } from "../../functions/self-hosted/edge/rate-batcher";
import { evaluateRules } from "../../functions/self-hosted/edge/rules";
import type { EdgeRule } from "../../functions/self-hosted/edge/store";
import { parseAddress } from "../../shared/net/cidr";

const client = { text: "192.0.2.7", address: parseAddress("192.0.2.7") };
const now = new Date("2030-01-01T00:00:00Z");
const noTake: TakeOne = () => {
  throw new Error("no rate limit expected");
};
const ban = (id: string, path: string | null, expiresAt: string | null = null): EdgeRule => ({
  id,
  kind: "ban",
  path,
  config: { cidr: "192.0.2.0/24", expiresAt, reason: null },
});

describe("edge rules: the per-path match cache", () => {
  it("decides a path seen before the same way, and a new rules array afresh", () => {
    const rules = [ban("rr_admin", "/admin/**")];
    expect(evaluateRules(noTake, rules, client, ["/public"], now)).toBeNull();
    expect(evaluateRules(noTake, rules, client, ["/admin/x"], now)).toMatchObject({ reason: "banned", ruleId: "rr_admin" });
    // Cached now: same answers.
    expect(evaluateRules(noTake, rules, client, ["/public"], now)).toBeNull();
    expect(evaluateRules(noTake, rules, client, ["/admin/x"], now)).toMatchObject({ reason: "banned", ruleId: "rr_admin" });
    // A reload builds a new array: a rule on /public applies at once, the old array's cache is not used.
    const reloaded = [ban("rr_admin", "/admin/**"), ban("rr_public", "/public")];
    expect(evaluateRules(noTake, reloaded, client, ["/public"], now)).toMatchObject({ reason: "banned", ruleId: "rr_public" });
    expect(evaluateRules(noTake, [], client, ["/admin/x"], now)).toBeNull();
  });

  it("matches any of a request's path forms, and not the forms of another request with the same first form", () => {
    const rules = [ban("rr_admin", "/admin")];
    // `/x%2Fadmin`-like: a decoded form names /admin.
    expect(evaluateRules(noTake, rules, client, ["/a%2F..%2Fadmin", "/admin"], now)).toMatchObject({ ruleId: "rr_admin" });
    expect(evaluateRules(noTake, rules, client, ["/a%2F..%2Fadmin"], now)).toBeNull();
    // A refused path (no form) is 400 whatever was cached.
    expect(evaluateRules(noTake, rules, client, [], now)).toMatchObject({ reason: "bad_request", ruleId: null });
  });

  it("reads a cached ban's expiry against each request's time", () => {
    const rules = [ban("rr_until", "/", "2030-01-01T00:01:00Z")];
    expect(evaluateRules(noTake, rules, client, ["/"], now)).toMatchObject({ reason: "banned" });
    expect(evaluateRules(noTake, rules, client, ["/"], new Date("2030-01-01T00:02:00Z"))).toBeNull();
  });

  it("answers at once when every rate limit is granted without waiting, and waits when one must", async () => {
    const limit: EdgeRule = { id: "rr_rate", kind: "rate-limit", path: "/**", config: { limit: 10, windowSeconds: 60, by: "ip" } };
    const granted = { ok: true, windowEnd: now.getTime() + 60_000 };
    expect(evaluateRules(() => granted, [limit], client, ["/x"], now)).toBeNull();
    const refused = evaluateRules(() => Promise.resolve({ ok: false, windowEnd: granted.windowEnd }), [limit], client, ["/x"], now);
    expect(refused).toBeInstanceOf(Promise);
    expect(await refused).toMatchObject({ reason: "rate_limited", ruleId: "rr_rate", headers: { "retry-after": "60", "ratelimit-limit": "10" } });
  });
});
