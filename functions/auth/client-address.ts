/**
 * The client address sign-in is rate-limited by. On the Worker, Cloudflare's
 * `CF-Connecting-IP` (set by Cloudflare's edge, which overwrites a client's
 * own); on the Node adapter, the connection's peer (the header is not believed
 * there: anyone could send it). An IPv6 client counts as its /64, which one
 * subscriber usually holds whole. Unknown (a request made in-process): none,
 * and only the per-address limit applies.
 */
import type { IncomingMessage } from "node:http";
import type { AppContext } from "../../shared/http/context";
import { parseAddress } from "../../shared/net/cidr";

function peerOf(c: AppContext): string | undefined {
  if (c.get("config").mode === "cloud") return c.req.header("cf-connecting-ip");
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return incoming?.socket?.remoteAddress;
}

export function clientKey(c: AppContext): string | undefined {
  const text = peerOf(c);
  const address = text ? parseAddress(text) : null;
  if (!address) return undefined;
  if (address.family === 4) return `v4:${address.value.toString(16)}`;
  return `v6:${(address.value >> 64n).toString(16)}/64`;
}
