/**
 * The client address behind trusted proxies (shared/net/forwarded-client.ts):
 * every hop form of X-Forwarded-For and Forwarded, trusted chains, hops that
 * do not parse (the client is unknown, never the proxy) and hostile headers.
 */
import { describe, expect, it } from "vitest";
import { parseCidr } from "../../shared/net/cidr";
import { clientAddress, isTrustedPeer } from "../../shared/net/forwarded-client";
import { forwardedNodeText } from "../../shared/net/forwarded-node";

const trusted = ["10.0.0.0/8", "fd00::/8"].map((c) => parseCidr(c)!);
const PROXY = "10.0.0.1";
const xff = (header: string | string[], peer = PROXY) => clientAddress(peer, header, trusted).text;
const fwd = (header: string | string[], peer = PROXY) => clientAddress(peer, undefined, trusted, header).text;

describe("one hop", () => {
  it.each([
    ["6.6.6.6", "6.6.6.6"],
    [" 6.6.6.6 ", "6.6.6.6"],
    ["6.6.6.6:1234", "6.6.6.6"],
    ["2001:db8::1", "2001:db8::1"],
    ["[2001:db8::1]", "2001:db8::1"],
    ["[2001:db8::1]:4711", "2001:db8::1"],
    ["[::ffff:6.6.6.6]:80", "::ffff:6.6.6.6"],
    ['"[2001:db8::1]:4711"', "2001:db8::1"],
    ['"192.0.2.60:80"', "192.0.2.60"],
  ])("%s is %s", (raw, text) => expect(forwardedNodeText(raw)).toBe(text));

  it.each(["", "6.6.6.6:", "6.6.6.6:port", "6.6.6.6:123456", "[2001:db8::1", "[2001:db8::1]x", "[2001:db8::1]:", '"6.6.6.6', '"', "x".repeat(81)])(
    "%j is no hop (an address is checked by parseAddress after)",
    (raw) => expect(forwardedNodeText(raw)).toBeNull(),
  );
});

describe("X-Forwarded-For from a trusted proxy", () => {
  it("reads IPv4, ports, bracketed and IPv4-mapped IPv6 as the address a ban names", () => {
    expect(xff("6.6.6.6")).toBe("6.6.6.6");
    expect(xff("6.6.6.6:1234")).toBe("6.6.6.6");
    expect(xff("[::ffff:6.6.6.6]:80")).toBe("6.6.6.6");
    expect(clientAddress(PROXY, "[::ffff:6.6.6.6]:80", trusted).address).toEqual({ family: 4, value: 0x06060606n });
    expect(xff("::ffff:6.6.6.6")).toBe("6.6.6.6");
    expect(xff("[2001:db8::1]:443")).toBe("2001:db8::1");
    expect(xff("2001:db8::1")).toBe("2001:db8::1");
  });

  it("walks from the right past trusted hops, across header lines", () => {
    expect(xff("1.1.1.1, 6.6.6.6, 10.0.0.2, [fd00::1]:9")).toBe("6.6.6.6");
    expect(xff(["1.1.1.1, 6.6.6.6:5", "10.0.0.2"])).toBe("6.6.6.6");
    expect(xff(["6.6.6.6", "10.0.0.3:80"])).toBe("6.6.6.6");
    // Entries left of the client are whatever the client wrote: never read.
    expect(xff("garbage, 6.6.6.6")).toBe("6.6.6.6");
  });

  it("a chain of trusted hops only, read to its end: the leftmost hop", () => {
    expect(xff("10.0.0.9, 10.0.0.2")).toBe("10.0.0.9");
    expect(xff("")).toBe(PROXY);
  });

  it("a hop that does not parse makes the client unknown, never the proxy", () => {
    for (const header of ["unknown", "_hidden", "6.6.6.6:x", "6.6.6.6, nonsense, 10.0.0.2", "[::1", ", 10.0.0.2", "6.6.6.6,,10.0.0.2"]) {
      expect(clientAddress(PROXY, header, trusted), header).toEqual({ text: "unknown", address: null });
    }
  });

  it("ignores the header from an untrusted peer, or without trusted proxies", () => {
    expect(xff("6.6.6.6:1234", "198.51.100.7")).toBe("198.51.100.7");
    expect(clientAddress("::ffff:198.51.100.7", "6.6.6.6", []).text).toBe("198.51.100.7");
    expect(clientAddress(PROXY, "6.6.6.6", []).text).toBe(PROXY);
    expect(isTrustedPeer("::ffff:10.1.2.3", trusted)).toBe(true);
    expect(isTrustedPeer("198.51.100.7", trusted)).toBe(false);
  });

  it("hostile long headers: bounded by hops and characters, never the proxy", () => {
    const many = Array.from({ length: 100_000 }, () => "10.0.0.5").join(",");
    expect(clientAddress(PROXY, many, trusted)).toEqual({ text: "unknown", address: null });
    const long = `6.6.6.6,${"1".repeat(1_000_000)}`;
    expect(clientAddress(PROXY, long, trusted)).toEqual({ text: "unknown", address: null });
    const commas = ",".repeat(1_000_000);
    expect(clientAddress(PROXY, commas, trusted)).toEqual({ text: "unknown", address: null });
    // A long left part is never reached when the client is near the right.
    expect(xff(`${"9.9.9.9,".repeat(100_000)}6.6.6.6:1, 10.0.0.2`)).toBe("6.6.6.6");
    const started = performance.now();
    for (let i = 0; i < 100; i++) clientAddress(PROXY, many, trusted);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe("Forwarded (RFC 7239) from a trusted proxy, without X-Forwarded-For", () => {
  it("reads for= in every form, quoted or not, case-insensitively, among other parameters", () => {
    expect(fwd("for=6.6.6.6")).toBe("6.6.6.6");
    expect(fwd('for="6.6.6.6:1234"')).toBe("6.6.6.6");
    expect(fwd('for="[::ffff:6.6.6.6]:80"')).toBe("6.6.6.6");
    expect(fwd('For="[2001:db8:cafe::17]:4711"')).toBe("2001:db8:cafe::17");
    expect(fwd('for="[2001:db8::1]"')).toBe("2001:db8::1");
    expect(fwd("for=192.0.2.60;proto=http;by=203.0.113.43")).toBe("192.0.2.60");
    expect(fwd("proto=https; for=192.0.2.60:80")).toBe("192.0.2.60");
  });

  it("walks elements and header lines from the right past trusted hops", () => {
    expect(fwd("for=192.0.2.43, for=6.6.6.6, for=10.0.0.2")).toBe("6.6.6.6");
    expect(fwd(['for=192.0.2.43, for="[::ffff:6.6.6.6]:80"', 'for="[fd00::3]:80";proto=https'])).toBe("6.6.6.6");
  });

  it("unknown, obfuscated or missing for= makes the client unknown, never the proxy", () => {
    for (const header of ["for=unknown", "for=_hidden", 'for="_gazonk"', "proto=https", "for=6.6.6.6, for=unknown, for=10.0.0.2", "for=", 'for="[::1]'])
      expect(clientAddress(PROXY, undefined, trusted, header), header).toEqual({ text: "unknown", address: null });
  });

  it("X-Forwarded-For, when present, is the header read", () => {
    expect(clientAddress(PROXY, "6.6.6.6", trusted, "for=7.7.7.7").text).toBe("6.6.6.6");
    expect(clientAddress("198.51.100.7", undefined, trusted, "for=7.7.7.7").text).toBe("198.51.100.7");
  });
});
