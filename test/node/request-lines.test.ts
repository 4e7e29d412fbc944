/**
 * The compact text form of request lines (functions/logs/request-lines.ts): any value survives a round trip,
 * null stays apart from empty and from a literal `\N`, and no value can end or split its line.
 */
import { describe, expect, it } from "vitest";
import { decodeRequestLines, encodeRequestLine, type RequestLine } from "../../functions/logs/request-lines";

const base: RequestLine = {
  at: 1_900_000_000_123,
  deploymentId: "dpl_1",
  method: "GET",
  host: "shop.apps.test",
  path: "/",
  status: 200,
  durationMs: 3,
  bytes: 512,
  clientAddress: "203.0.113.9",
  environment: "production",
  rule: null,
};

describe("request lines' text form", () => {
  it("round-trips awkward values, nulls and empties, each line on one line of text", () => {
    const lines: RequestLine[] = [
      base,
      { ...base, path: "/a\tb\nc\rd\\e\0f", host: "\\N", environment: "", rule: "rr_1", deploymentId: null },
      { ...base, host: null, environment: null, clientAddress: "\\", method: "", path: "\\\\t" },
      { ...base, path: "/名前/🚀", status: 499, durationMs: 0, bytes: 0 },
    ];
    const text = lines.map(encodeRequestLine).join("");
    expect(text.split("\n")).toHaveLength(lines.length + 1);
    expect(text).not.toContain("\0");
    expect(decodeRequestLines(text)).toEqual(lines);
    expect(decodeRequestLines("")).toEqual([]);
  });
});
