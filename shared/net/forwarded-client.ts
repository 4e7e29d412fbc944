/**
 * The client address behind trusted proxies, for the self-hosted edge's rules
 * and server logs and for the sign-in limits on the Node adapter: the connection's
 * peer, unless that peer is a trusted proxy (TRUSTED_PROXIES), in which case
 * the forwarding header (`X-Forwarded-For`, else `Forwarded`'s `for=`) is read
 * from the right, skipping trusted proxies, and the first hop that is not one
 * is the client. Without trusted proxies the headers are ignored: a client
 * could otherwise write any address into them and walk past a ban.
 *
 * A hop that does not parse (`unknown`, `_hidden`, garbage) stops the walk:
 * the client is unknown (no address, shown as `unknown`), never the proxy
 * that reported it, whose address a ban would not name. An unknown client
 * matches no ban or allow list (so an allow list refuses it) and all unknown
 * clients share one rate-limit count. The same holds when the walk stops at
 * its caps with only trusted hops read; a header read to its end that names
 * only trusted hops makes its leftmost hop the client (a request that started
 * inside the trusted network). Pure (no Node APIs): the Worker bundle may import it.
 */
import { type Address, type Cidr, cidrContains, parseAddress } from "./cidr";
import { forwardedForParam, forwardedNodeText } from "./forwarded-node";

/** At most this many hops are read (from the right)... */
const MAX_HOPS = 32;
/** ...within the header's last this many characters: the walk is linear and bounded whatever a client sends. */
const MAX_CHARS = 4096;

export interface Client {
  /** As logged: IPv4-mapped IPv6 shown as plain IPv4. */
  text: string;
  address: Address | null;
}

const UNKNOWN: Client = { text: "unknown", address: null };

const trustedBy = (trusted: Cidr[], a: Address | null) => a !== null && trusted.some((c) => cidrContains(c, a));

function clientOf(text: string): Client {
  const address = parseAddress(text);
  const shown = address?.family === 4 && text.includes(":") ? text.slice(text.lastIndexOf(":") + 1) : text;
  return { text: shown, address };
}

/** Whether the connection's peer is one of the trusted proxies. */
export const isTrustedPeer = (peer: string | undefined, trusted: Cidr[]) => trusted.length > 0 && trustedBy(trusted, parseAddress(peer ?? ""));

type HeaderValue = string | string[] | undefined;
const joined = (value: string | string[]) => (Array.isArray(value) ? value.join(",") : value);

/**
 * `forwardedFor` is the X-Forwarded-For value; `forwarded` the Forwarded value,
 * read only without X-Forwarded-For (a proxy writes one of them). Several
 * header lines count as one list, in order.
 */
export function clientAddress(peer: string | undefined, forwardedFor: HeaderValue, trusted: Cidr[], forwarded?: HeaderValue): Client {
  const direct = clientOf(peer ?? "");
  if (trusted.length === 0 || !trustedBy(trusted, direct.address)) return direct;
  if (forwardedFor !== undefined) return walk(joined(forwardedFor), trusted, direct, forwardedNodeText);
  if (forwarded !== undefined) return walk(joined(forwarded), trusted, direct, forwardedElementText);
  return direct;
}

function forwardedElementText(element: string): string | null {
  const value = forwardedForParam(element);
  return value === null ? null : forwardedNodeText(value);
}

function walk(header: string, trusted: Cidr[], direct: Client, hopText: (entry: string) => string | null): Client {
  // Only the last MAX_CHARS characters are looked at; the entry that window cuts is not read.
  const cut = header.length > MAX_CHARS;
  const tail = cut ? header.slice(-MAX_CHARS) : header;
  let end = tail.length;
  let last = direct;
  for (let hops = 0; hops < MAX_HOPS; hops++) {
    const comma = tail.lastIndexOf(",", end - 1);
    if (comma < 0 && cut) return UNKNOWN;
    const entry = tail.slice(comma + 1, end);
    // An empty header is the proxy's own request: its peer stays the client.
    if (hops > 0 || comma >= 0 || entry.trim() !== "") {
      const text = hopText(entry);
      const hop = text === null ? null : clientOf(text);
      if (!hop?.address) return UNKNOWN;
      if (!trustedBy(trusted, hop.address)) return hop;
      last = hop;
    }
    if (comma < 0) return last;
    end = comma;
  }
  return UNKNOWN;
}
