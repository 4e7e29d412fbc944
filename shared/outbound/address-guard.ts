/**
 * Which IP addresses an outbound send to a user-supplied URL must not reach:
 * loopback, private (RFC 1918, CGNAT, ULA), link-local, cloud metadata,
 * multicast and reserved ranges, including the IPv6 forms that embed an IPv4
 * address (IPv4-mapped `::ffff:a.b.c.d`, NAT64, 6to4, IPv4-compatible). Pure
 * TypeScript: the Worker checks literal addresses in URLs with it, the Node
 * adapter every address DNS returns. Link-local and metadata addresses are
 * refused whatever the operator allows: nothing a webhook needs lives there,
 * and the cloud credentials of the host do.
 */

export interface Refusal {
  reason: string;
  /** Link-local and cloud metadata: refused even when private networks are allowed. */
  always: boolean;
}

type Range = [base: number, bits: number, reason: string];

/**
 * Cloud metadata and platform endpoints: AWS/GCP/Azure IMDS, ECS task metadata,
 * EKS Pod Identity (all inside 169.254.0.0/16, which is refused whole anyway),
 * Alibaba, Oracle and Azure's WireServer (outside it).
 */
const V4_METADATA = new Set(["169.254.169.254", "169.254.170.2", "169.254.170.23", "100.100.100.200", "192.0.0.192", "168.63.129.16"]);

/** IPv6 metadata endpoints: AWS IMDS and EKS Pod Identity, GCP (as 8 groups). */
const V6_METADATA = new Set(["fd00:ec2::254", "fd00:ec2::23", "fd20:ce::254"].map((a) => parseIPv6(a)!.join(":")));

/** Names that mean a metadata server wherever they resolve (GCP; the Worker cannot resolve names). */
const METADATA_HOSTNAMES = new Set(["metadata.google.internal", "metadata.goog"]);

const LINK_LOCAL_V4: Range = [v4("169.254.0.0"), 16, "a link-local address"];

const V4_RANGES: Range[] = [
  [v4("0.0.0.0"), 8, "a reserved address"],
  [v4("10.0.0.0"), 8, "a private address"],
  [v4("100.64.0.0"), 10, "a private (CGNAT) address"],
  [v4("127.0.0.0"), 8, "a loopback address"],
  [v4("172.16.0.0"), 12, "a private address"],
  [v4("192.0.0.0"), 24, "a reserved address"],
  [v4("192.0.2.0"), 24, "a reserved address"],
  [v4("192.168.0.0"), 16, "a private address"],
  [v4("198.18.0.0"), 15, "a reserved address"],
  [v4("198.51.100.0"), 24, "a reserved address"],
  [v4("203.0.113.0"), 24, "a reserved address"],
  [v4("224.0.0.0"), 4, "a multicast address"],
  [v4("240.0.0.0"), 4, "a reserved address"],
];

function v4(text: string): number {
  const n = parseIPv4(text);
  if (n === null) throw new Error(`bad IPv4 literal ${text}`);
  return n;
}

/** Strict dotted quad to a 32-bit unsigned number, or null. */
export function parseIPv4(text: string): number | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const b = Number(p);
    if (b > 255) return null;
    n = n * 256 + b;
  }
  return n;
}

/** An IPv6 literal (optionally bracketed, with a zone, with a trailing dotted quad) to 8 groups, or null. */
export function parseIPv6(input: string): number[] | null {
  let text = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input;
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  if (!text.includes(":")) return null;
  // A trailing dotted quad (`::ffff:10.0.0.1`) becomes its two hex groups.
  const lastColon = text.lastIndexOf(":");
  const last = text.slice(lastColon + 1);
  if (last.includes(".")) {
    const quad = parseIPv4(last);
    if (quad === null) return null;
    text = `${text.slice(0, lastColon + 1)}${Math.floor(quad / 65536).toString(16)}:${(quad % 65536).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  let parts: string[];
  if (halves.length === 1) {
    if (head.length !== 8) return null;
    parts = head;
  } else {
    if (head.length + tail.length > 7) return null;
    parts = [...head, ...new Array<string>(8 - head.length - tail.length).fill("0"), ...tail];
  }
  if (!parts.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  return parts.map((g) => parseInt(g, 16));
}

function inRange(n: number, [base, bits]: Range): boolean {
  const size = 2 ** (32 - bits);
  return Math.floor(n / size) === Math.floor(base / size);
}

function refuseV4(n: number, prefix = ""): Refusal | null {
  const text = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
  if (V4_METADATA.has(text)) return { reason: `${prefix}a cloud metadata address`, always: true };
  if (inRange(n, LINK_LOCAL_V4)) return { reason: prefix + LINK_LOCAL_V4[2], always: true };
  const range = V4_RANGES.find((r) => inRange(n, r));
  return range ? { reason: prefix + range[2], always: false } : null;
}

/** A refusal of the IPv4 address embedded in an IPv6 form; a form refused on its own still reports the embedded address when that one is always refused. */
function embedded(n: number, prefix: string, own: Refusal): Refusal {
  const inner = refuseV4(n, prefix);
  return inner?.always ? inner : own;
}

function refuseV6(g: number[]): Refusal | null {
  const zeroUpTo = (k: number) => g.slice(0, k).every((x) => x === 0);
  const low32 = g[6]! * 65536 + g[7]!;
  if (zeroUpTo(8)) return { reason: "a reserved address", always: false };
  if (zeroUpTo(7) && g[7] === 1) return { reason: "a loopback address", always: false };
  // ::ffff:a.b.c.d (IPv4-mapped) and 64:ff9b::a.b.c.d (NAT64) reach the embedded IPv4 address.
  if (zeroUpTo(5) && g[5] === 0xffff) return refuseV4(low32, "IPv4-mapped ");
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return refuseV4(low32, "NAT64 ");
  if (zeroUpTo(6)) return embedded(low32, "IPv4-compatible ", { reason: "a reserved (IPv4-compatible) address", always: false });
  // 6to4 embeds an IPv4 address in groups 1-2.
  if (g[0] === 0x2002) return refuseV4(g[1]! * 65536 + g[2]!, "6to4 ");
  if (V6_METADATA.has(g.join(":"))) return { reason: "a cloud metadata address", always: true };
  const first = g[0]!;
  if ((first & 0xffc0) === 0xfe80) return { reason: "a link-local address", always: true };
  if ((first & 0xfe00) === 0xfc00) return { reason: "a private (ULA) address", always: false };
  if ((first & 0xffc0) === 0xfec0) return { reason: "a private (site-local) address", always: false };
  if ((first & 0xff00) === 0xff00) return { reason: "a multicast address", always: false };
  if (first === 0x2001 && g[1] === 0x0db8) return { reason: "a reserved address", always: false };
  if (first === 0x2001 && g[1] === 0) return { reason: "a reserved (Teredo) address", always: false };
  // NAT64 local use (64:ff9b:1::/48) carries an IPv4 address in its last 32 bits too.
  if (first === 0x0064 && g[1] === 0xff9b && g[2] === 1) return embedded(low32, "NAT64 ", { reason: "a private (NAT64 local-use) address", always: false });
  if (first === 0x0100 && g.slice(1, 4).every((x) => x === 0)) return { reason: "a reserved address", always: false };
  return null;
}

/** Why this IP address must not be reached, or null when it is a public address. Not an IP: null. */
export function classifyAddress(ip: string): Refusal | null {
  const v4n = parseIPv4(ip);
  if (v4n !== null) return refuseV4(v4n);
  const v6 = parseIPv6(ip);
  return v6 ? refuseV6(v6) : null;
}

export function isIpLiteral(host: string): boolean {
  return parseIPv4(host) !== null || parseIPv6(host) !== null;
}

/** The refusal that applies under the operator's setting (link-local and metadata are always refused). */
export function refusalFor(ip: string, allowPrivate: boolean): Refusal | null {
  const refusal = classifyAddress(ip);
  if (!refusal) return null;
  return refusal.always || !allowPrivate ? refusal : null;
}

/** Host names that always mean this machine. */
export function isLocalHostname(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  return h === "localhost" || h.endsWith(".localhost");
}

/**
 * The refusal for a URL's host before any DNS lookup: `localhost` names, metadata
 * server names and literal addresses. Brackets of IPv6 literals are accepted.
 */
export function refusalForHost(rawHost: string, allowPrivate: boolean): Refusal | null {
  const host = rawHost.startsWith("[") && rawHost.endsWith("]") ? rawHost.slice(1, -1) : rawHost;
  const name = host.toLowerCase().replace(/\.$/, "");
  if (METADATA_HOSTNAMES.has(name)) return { reason: "a cloud metadata server name", always: true };
  if (isLocalHostname(name)) return allowPrivate ? null : { reason: "a loopback address", always: false };
  return isIpLiteral(host) ? refusalFor(host, allowPrivate) : null;
}

/** What a refused send reports: says which rule refused it, and whether the operator's setting could allow it. */
export function refusalMessage(refusal: Refusal): string {
  return refusal.always
    ? `The destination is ${refusal.reason}; link-local and cloud metadata addresses are always refused`
    : `The destination is ${refusal.reason}; sends to private networks are refused unless OUTBOUND_ALLOW_PRIVATE=true`;
}
