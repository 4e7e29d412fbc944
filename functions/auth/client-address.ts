/**
 * The client address sign-in is rate-limited by. On the Worker, Cloudflare's
 * `CF-Connecting-IP` (set by Cloudflare's edge, which overwrites a client's
 * own); on the Node adapter, the connection's peer, or behind a trusted proxy
 * (TRUSTED_PROXIES) the client `X-Forwarded-For` names, read as the edge reads
 * it (shared/net/forwarded-client.ts). Without trusted proxies neither header is
 * believed there: anyone could send them, and behind an untrusted proxy every
 * client shares the proxy's budget. An IPv6 client counts as its /64, which one
 * subscriber usually holds whole. Unknown (a request made in-process): none,
 * and only the per-address limit applies.
 */
import type { AppContext } from "../../shared/http/context";
import { nodeEnv } from "../../shared/http/node-env";
import { parseAddress } from "../../shared/net/cidr";
import { clientAddress } from "../../shared/net/forwarded-client";

/** The client's address as text (the same reading as the sign-in limits), or undefined when unknown. */
export function peerOf(c: AppContext): string | undefined {
  const config = c.get("config");
  if (config.mode === "cloud") return c.req.header("cf-connecting-ip");
  const peer = nodeEnv(c)?.incoming?.socket?.remoteAddress;
  return clientAddress(peer, c.req.header("x-forwarded-for"), config.trustedProxies ?? [], c.req.header("forwarded")).text || undefined;
}

export function clientKey(c: AppContext): string | undefined {
  const text = peerOf(c);
  const address = text ? parseAddress(text) : null;
  if (!address) return undefined;
  if (address.family === 4) return `v4:${address.value.toString(16)}`;
  return `v6:${(address.value >> 64n).toString(16)}/64`;
}
