/**
 * IP addresses and CIDR blocks for route rules (ban, allow-deny) and trusted
 * proxies. An address is a family and a bigint; an IPv4-mapped IPv6 address
 * (`::ffff:1.2.3.4`, which Node reports for IPv4 clients on a dual-stack
 * socket) is treated as the IPv4 address, so v4 rules catch those clients too.
 * Parsing is a fixed number of splits over short input (callers cap the length).
 */
import { parseIPv4, parseIPv6 } from "../outbound/address-guard";

export interface Address {
  family: 4 | 6;
  value: bigint;
}

export interface Cidr {
  family: 4 | 6;
  /** The network address (host bits cleared). */
  base: bigint;
  bits: number;
  /** Host bits and the network part (`base >> hostBits`), computed once: a check is then one shift (the edge checks every rule's blocks per request). */
  hostBits: bigint;
  prefix: bigint;
}

const MAX_TEXT = 64;

export function parseAddress(text: string): Address | null {
  if (text.length === 0 || text.length > MAX_TEXT) return null;
  const v4 = parseIPv4(text);
  if (v4 !== null) return { family: 4, value: BigInt(v4) };
  const groups = parseIPv6(text);
  if (groups === null) return null;
  let value = 0n;
  for (const g of groups) value = (value << 16n) | BigInt(g);
  // ::ffff:a.b.c.d
  if (value >> 32n === 0xffffn) return { family: 4, value: value & 0xffffffffn };
  return { family: 6, value };
}

/** `10.0.0.0/8`, `2001:db8::/32`, or a single address (a /32 or /128). Host bits set (`10.0.0.1/8`) are refused: they usually mean a typo. */
export function parseCidr(text: string): Cidr | null {
  if (text.length === 0 || text.length > MAX_TEXT) return null;
  const slash = text.indexOf("/");
  const address = parseAddress(slash < 0 ? text : text.slice(0, slash));
  if (!address) return null;
  const width = address.family === 4 ? 32 : 128;
  let bits = width;
  if (slash >= 0) {
    const suffix = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(suffix)) return null;
    bits = Number(suffix);
    // An IPv4-mapped block written in IPv6 form counts its prefix over 128 bits, the last 32 being the v4 part.
    if (address.family === 4 && text.slice(0, slash).includes(":")) {
      if (bits < 96 || bits > 128) return null;
      bits -= 96;
    }
    if (bits > width) return null;
  }
  const hostBits = BigInt(width - bits);
  const base = (address.value >> hostBits) << hostBits;
  if (base !== address.value) return null;
  return { family: address.family, base, bits, hostBits, prefix: address.value >> hostBits };
}

export function cidrContains(cidr: Cidr, address: Address): boolean {
  return cidr.family === address.family && address.value >> cidr.hostBits === cidr.prefix;
}

/** Whether `text` is a valid address or CIDR block; the reason when not, for validation messages. */
export function cidrProblem(text: string): string | null {
  if (parseCidr(text)) return null;
  const slash = text.indexOf("/");
  const address = parseAddress(slash < 0 ? text : text.slice(0, slash));
  if (!address) return "must be an IPv4 or IPv6 address or CIDR block (e.g. 203.0.113.0/24, 2001:db8::/32)";
  return "has a prefix length out of range or host bits set after the prefix (use the network address, e.g. 10.0.0.0/8)";
}
