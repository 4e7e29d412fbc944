/**
 * The listener's cap on open connections per client address (MAX_CONNECTIONS_PER_CLIENT).
 *
 * Counted per connection peer when the server accepts it (`connection` event):
 * a connection over its address's cap is destroyed at once, before it is read,
 * so one address holding thousands of idle or half-open connections keeps at
 * most `max` descriptors and the others' connections are still accepted. A
 * connection counts until it closes, upgraded ones (WebSockets through the
 * edge) included. IPv4-mapped IPv6 peers (`::ffff:1.2.3.4`) count as the IPv4
 * address. Peers in TRUSTED_PROXIES are not capped: every client behind a
 * proxy in front of the edge arrives from the proxy's address. The count map
 * holds only addresses with open connections (an entry is deleted at 0), so
 * it is bounded by the open connections.
 */
import type { Server } from "node:net";
import type { Socket } from "node:net";
import type { Cidr } from "../../shared/net/cidr";
import { isTrustedPeer } from "../../shared/net/forwarded-client";

export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 256;

export interface ConnectionGuard {
  /** Open connections per (normalized) peer address, trusted peers excluded. */
  readonly open: ReadonlyMap<string, number>;
  /** Connections refused over the cap since the start. */
  readonly refused: number;
}

/** `::ffff:1.2.3.4` is 1.2.3.4; any other address is itself. */
export function peerKey(address: string): string {
  return address.length > 7 && address.slice(0, 7).toLowerCase() === "::ffff:" && address.includes(".") ? address.slice(7) : address;
}

export function guardConnections(server: Server, opts: { maxPerClient: number; trustedProxies: Cidr[] }): ConnectionGuard {
  const open = new Map<string, number>();
  let refused = 0;
  const max = Math.max(1, Math.floor(opts.maxPerClient));
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress;
    // No address: the peer is already gone.
    if (address === undefined) return void socket.destroy();
    if (isTrustedPeer(address, opts.trustedProxies)) return;
    const key = peerKey(address);
    const count = open.get(key) ?? 0;
    if (count >= max) {
      refused++;
      socket.destroy();
      return;
    }
    open.set(key, count + 1);
    socket.once("close", () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    });
  });
  return {
    open,
    get refused() {
      return refused;
    },
  };
}
