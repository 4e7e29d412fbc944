/**
 * Ids (shared/ids.ts): `<prefix>_` + 10 time characters + 16 random ones, sorting by
 * creation time; every id differs, also within one millisecond (where the time part is
 * shared); the random characters are uniform over the 32-character alphabet.
 */
import { describe, expect, it } from "vitest";
import { randomText } from "../../shared/crypto/encoding";
import { newId } from "../../shared/ids";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

describe("newId", () => {
  it("has the prefix, the time and 16 random characters; later milliseconds sort after", () => {
    const at = Date.UTC(2026, 11, 7, 4, 0, 0);
    const ids = [newId("req", at), newId("req", at + 1), newId("req", at + 32), newId("req", at + 1024 * 1024)];
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-z]{26}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(newId("req", at).slice(4, 14)).toBe(ids[0]!.slice(4, 14));
    expect(ids[1]!.slice(4, 14)).not.toBe(ids[0]!.slice(4, 14));
  });

  it("gives 100,000 different ids within one millisecond, their random characters uniform", () => {
    const at = Date.UTC(2026, 11, 7, 4, 0, 0);
    const ids = Array.from({ length: 100_000 }, () => newId("x", at));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(2, 12))).size).toBe(1);
    const counts = new Map<string, number>();
    for (const id of ids) for (const ch of id.slice(12)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect([...counts.keys()].sort().join("")).toBe(ALPHABET);
    // 1.6 M characters: 50,000 expected each, a standard deviation of ~220.
    for (const n of counts.values()) expect(Math.abs(n - 50_000)).toBeLessThan(2_500);
  });
});

describe("randomText", () => {
  it("refuses an alphabet that would bias it and more characters than the pool hands out at once", () => {
    expect(randomText(8, "0123456789abcdef")).toMatch(/^[0-9a-f]{8}$/);
    expect(() => randomText(8, "0123456789")).toThrow(RangeError);
    expect(() => randomText(4096, ALPHABET)).toThrow(RangeError);
  });
});
