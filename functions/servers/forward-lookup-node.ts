/**
 * The Node edge's connection to a server's public URL (issue 22, item 5) goes
 * through the outbound guard: the URL's name is resolved once per forward,
 * every address it answers is checked (loopback and private ones refused
 * unless OUTBOUND_ALLOW_PRIVATE; link-local and metadata always), and the
 * connection is then made to those checked addresses only (a lookup that
 * answers them), so a second, different DNS answer between the check and the
 * connect (DNS rebinding) cannot reach anything unchecked. A refused forward
 * sends nothing.
 */
import dns from "node:dns";
import type { LookupFunction } from "node:net";
import { isIpLiteral, refusalFor, refusalForHost, refusalMessage } from "../../shared/outbound/address-guard";

export type Resolve = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

const systemResolve: Resolve = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export type ForwardConnect = { lookup?: LookupFunction } | { refused: string };

/** The lookup to connect with (none for a literal address, which was checked here), or why the forward is refused. */
export async function guardedForwardConnect(origin: URL, allowPrivate: boolean, resolve: Resolve = systemResolve): Promise<ForwardConnect> {
  const early = refusalForHost(origin.hostname, allowPrivate);
  if (early) return { refused: refusalMessage(early) };
  const host = origin.hostname.replace(/^\[|\]$/g, "");
  if (isIpLiteral(host)) return {};
  let addresses: Array<{ address: string; family: number }>;
  try {
    addresses = await resolve(host);
  } catch {
    // Not resolvable: the connection fails as any unreachable server's does.
    return { lookup: (_h, _o, callback) => callback(Object.assign(new Error("no address"), { code: "ENOTFOUND" }), "", 0) };
  }
  for (const a of addresses) {
    const refusal = refusalFor(a.address, allowPrivate);
    if (refusal) return { refused: refusalMessage(refusal) };
  }
  const pinned: LookupFunction = (_hostname, options, callback) => {
    const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
    if (wanted.length === 0) return callback(Object.assign(new Error("no address"), { code: "ENOTFOUND" }), "", 0);
    if (options.all) return (callback as unknown as (e: null, a: typeof wanted) => void)(null, wanted);
    callback(null, wanted[0]!.address, wanted[0]!.family);
  };
  return { lookup: pinned };
}
