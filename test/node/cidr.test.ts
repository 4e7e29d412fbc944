/** Addresses and CIDR blocks of route rules: parsing, containment, IPv4-mapped clients, and what is refused. */
import { describe, expect, it } from "vitest";
import { cidrContains, cidrProblem, parseAddress, parseCidr } from "../../shared/net/cidr";

const inBlock = (block: string, ip: string) => cidrContains(parseCidr(block)!, parseAddress(ip)!);

describe("CIDR blocks", () => {
  it("IPv4 blocks contain exactly their addresses", () => {
    expect(inBlock("10.0.0.0/8", "10.255.1.2")).toBe(true);
    expect(inBlock("10.0.0.0/8", "11.0.0.0")).toBe(false);
    expect(inBlock("203.0.113.7", "203.0.113.7")).toBe(true);
    expect(inBlock("203.0.113.7", "203.0.113.8")).toBe(false);
    expect(inBlock("0.0.0.0/0", "8.8.8.8")).toBe(true);
  });

  it("IPv6 blocks contain exactly their addresses", () => {
    expect(inBlock("2001:db8::/32", "2001:db8:ffff::1")).toBe(true);
    expect(inBlock("2001:db8::/32", "2001:db9::1")).toBe(false);
    expect(inBlock("::1", "::1")).toBe(true);
    expect(inBlock("::/0", "fe80::1")).toBe(true);
    expect(inBlock("::/0", "1.2.3.4")).toBe(false);
  });

  it("an IPv4 client seen as IPv4-mapped IPv6 matches IPv4 blocks, and a mapped block matches IPv4 clients", () => {
    expect(inBlock("192.0.2.0/24", "::ffff:192.0.2.10")).toBe(true);
    expect(inBlock("::ffff:192.0.2.0/120", "192.0.2.77")).toBe(true);
    expect(inBlock("::ffff:192.0.2.0/120", "192.0.3.1")).toBe(false);
  });

  it("refuses malformed blocks, out-of-range prefixes and host bits after the prefix, naming why", () => {
    for (const bad of [
      "",
      "10.0.0",
      "10.0.0.0/33",
      "10.0.0.0/-1",
      "10.0.0.0/",
      "2001:db8::/129",
      "300.1.1.1",
      "10.0.0.1/8",
      "abc",
      "1.2.3.4/8x",
      "x".repeat(100),
    ]) {
      expect(parseCidr(bad), bad).toBeNull();
      expect(cidrProblem(bad), bad).toBeTypeOf("string");
    }
    expect(cidrProblem("10.0.0.1/8")).toMatch(/host bits/);
    expect(cidrProblem("nonsense")).toMatch(/IPv4 or IPv6/);
    expect(cidrProblem("10.0.0.0/8")).toBeNull();
  });
});
