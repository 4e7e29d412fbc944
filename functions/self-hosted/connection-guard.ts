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
 * it is bounded by the open connections. An address already at its cap has its
 * next connections closed as they are accepted, before Node makes a socket of
 * them: a client reconnecting in a loop costs the server an accept and a close.
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

interface AcceptedHandle {
  getpeername(out: { address?: string }): number;
  close(): void;
}
type AcceptCallback = (this: unknown, err: number, client?: AcceptedHandle) => void;

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
  // Fast path: a connection from an address already at its cap is closed as the listener accepts it, before Node
  // makes a socket and an HTTP parser for it (a client that reconnects in a loop then costs the server little).
  // Node's own accept callback (net.js onconnection) is wrapped; where it is not there, the check above does it all.
  const refuseOnAccept = () => {
    const handle = (server as unknown as { _handle?: { onconnection?: AcceptCallback } })._handle;
    const accept = handle?.onconnection;
    if (!handle || typeof accept !== "function") return;
    handle.onconnection = function (this: unknown, err: number, client?: AcceptedHandle) {
      if (!err && client && typeof client.getpeername === "function" && typeof client.close === "function") {
        const peer: { address?: string } = {};
        if (client.getpeername(peer) === 0 && peer.address !== undefined && (open.get(peerKey(peer.address)) ?? 0) >= max) {
          refused++;
          client.close();
          return;
        }
      }
      return accept.call(this, err, client);
    };
  };
  if (server.listening) refuseOnAccept();
  else server.once("listening", refuseOnAccept);
  return {
    open,
    get refused() {
      return refused;
    },
  };
}
