/**
 * The client address behind trusted proxies, for the self-hosted edge's rules
 * and server logs and for the sign-in limits on the Node adapter: the connection's
 * peer, unless that peer is a trusted proxy (TRUSTED_PROXIES), in which case
 * `X-Forwarded-For` is read from the right, skipping trusted proxies, and the
 * first address that is not one is the client. Without trusted proxies the
 * header is ignored: a client could otherwise write any address into it and
 * walk past a ban. Pure (no Node APIs): the Worker bundle may import it.
 */
import { type Address, type Cidr, cidrContains, parseAddress } from "./cidr";

/** At most this many X-Forwarded-For entries are read (from the right). */
const MAX_HOPS = 32;

export interface Client {
  /** As logged: IPv4-mapped IPv6 shown as plain IPv4. */
  text: string;
  address: Address | null;
}

const trustedBy = (trusted: Cidr[], a: Address | null) => a !== null && trusted.some((c) => cidrContains(c, a));

function clientOf(text: string): Client {
  const address = parseAddress(text);
  const shown = address?.family === 4 && text.includes(":") ? text.slice(text.lastIndexOf(":") + 1) : text;
  return { text: shown, address };
}

/** Whether the connection's peer is one of the trusted proxies. */
export const isTrustedPeer = (peer: string | undefined, trusted: Cidr[]) => trusted.length > 0 && trustedBy(trusted, parseAddress(peer ?? ""));

export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: Cidr[]): Client {
  const direct = clientOf(peer ?? "");
  if (trusted.length === 0 || !trustedBy(trusted, direct.address) || forwardedFor === undefined) return direct;
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor;
  // Split from the right without reading more than MAX_HOPS entries of a long header.
  let end = header.length;
  let last = direct;
  for (let hops = 0; hops < MAX_HOPS && end > 0; hops++) {
    const comma = header.lastIndexOf(",", end - 1);
    const entry = header.slice(comma + 1, end).trim();
    end = Math.max(comma, 0);
    const candidate = clientOf(entry);
    if (!candidate.address) return last;
    if (!trustedBy(trusted, candidate.address)) return candidate;
    last = candidate;
  }
  return last;
}
