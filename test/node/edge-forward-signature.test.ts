/** The signed headers of a request forwarded to a build server's edge (shared/net/edge-forward.ts). */
import { describe, expect, it } from "vitest";
import { deriveEdgeKey, FORWARD_HEADERS, type ForwardFields, MAX_SKEW_SECONDS, signForward, verifyForward } from "../../shared/net/edge-forward";

const fields: ForwardFields = {
  method: "POST",
  target: "/orders?id=7",
  host: "shop.apps.example",
  clientAddress: "203.0.113.9",
  proto: "https",
  deploymentId: "dep_1",
};
const now = new Date("2026-11-28T07:00:00Z");

async function check(key: string, headers: Record<string, string>, over: { method?: string; target?: string } = {}, at = now) {
  return verifyForward(key, { method: over.method ?? fields.method, target: over.target ?? fields.target, header: (n) => headers[n] }, at);
}

describe("edge forwarding signature", () => {
  it("derives one key per runner token, the same every time", async () => {
    const a = await deriveEdgeKey("wsr_token_a");
    expect(a).toBe(await deriveEdgeKey("wsr_token_a"));
    expect(a).not.toBe(await deriveEdgeKey("wsr_token_b"));
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("a signed request verifies and yields its fields", async () => {
    const key = await deriveEdgeKey("wsr_token_a");
    const headers = await signForward(key, fields, now);
    expect(await check(key, headers)).toEqual({ ok: true, fields });
  });

  it("tampering with any signed field, or another server's key, fails", async () => {
    const key = await deriveEdgeKey("wsr_token_a");
    const headers = await signForward(key, fields, now);
    expect(await check(key, headers, { method: "GET" })).toEqual({ ok: false, reason: "bad_signature" });
    expect(await check(key, headers, { target: "/orders?id=8" })).toEqual({ ok: false, reason: "bad_signature" });
    const tampered: Array<[string, string]> = [
      [FORWARD_HEADERS.host, "admin.apps.example"],
      [FORWARD_HEADERS.client, "198.51.100.1"],
      [FORWARD_HEADERS.proto, "http"],
      [FORWARD_HEADERS.deployment, "dep_2"],
      [FORWARD_HEADERS.at, String(Number(headers[FORWARD_HEADERS.at]) - 1)],
      [FORWARD_HEADERS.signature, `${headers[FORWARD_HEADERS.signature]!.slice(0, -1)}A`],
    ];
    for (const [name, value] of tampered) {
      if (headers[name] === value) continue;
      expect(await check(key, { ...headers, [name]: value }), name).toEqual({ ok: false, reason: "bad_signature" });
    }
    expect(await check(await deriveEdgeKey("wsr_token_b"), headers)).toEqual({ ok: false, reason: "bad_signature" });
  });

  it("fields cannot be shifted into each other (length-prefixed canonical string)", async () => {
    const key = await deriveEdgeKey("wsr_token_a");
    const headers = await signForward(key, { ...fields, host: "a\n5:b", clientAddress: "c" }, now);
    expect(await check(key, { ...headers, [FORWARD_HEADERS.host]: "a", [FORWARD_HEADERS.client]: "b\n1:c" })).toMatchObject({ ok: false });
  });

  it("outside the clock window: expired; unsigned and malformed are told apart", async () => {
    const key = await deriveEdgeKey("wsr_token_a");
    const headers = await signForward(key, fields, now);
    const later = new Date(now.getTime() + (MAX_SKEW_SECONDS + 1) * 1000);
    const earlier = new Date(now.getTime() - (MAX_SKEW_SECONDS + 1) * 1000);
    expect(await check(key, headers, {}, later)).toEqual({ ok: false, reason: "expired" });
    expect(await check(key, headers, {}, earlier)).toEqual({ ok: false, reason: "expired" });
    expect(await check(key, headers, {}, new Date(now.getTime() + MAX_SKEW_SECONDS * 1000))).toMatchObject({ ok: true });
    expect(await check(key, {})).toEqual({ ok: false, reason: "unsigned" });
    const { [FORWARD_HEADERS.host]: _, ...noHost } = headers;
    expect(await check(key, noHost)).toEqual({ ok: false, reason: "malformed" });
    expect(await check(key, { ...headers, [FORWARD_HEADERS.signature]: "short" })).toEqual({ ok: false, reason: "malformed" });
  });
});
