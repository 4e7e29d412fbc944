/**
 * Outbound HTTP on the Node adapter: undici's client with a guarded DNS
 * lookup (undici rather than node:http: a keep-alive POST costs about half the CPU,
 * ~40 vs ~90 µs measured, and a notification fan-out is thousands of them). Every address a host name resolves to is checked at connect time (so
 * a second, different DNS answer cannot slip past a check made earlier), and a
 * host resolving to any loopback or private address is refused unless the
 * operator allows private networks (OUTBOUND_ALLOW_PRIVATE); link-local and cloud
 * metadata addresses (and metadata server names) are refused even then.
 * Redirects are never followed, the whole exchange times out, and the response
 * body is discarded unread.
 */
import dns from "node:dns";
import type { LookupFunction } from "node:net";
import { Agent, errors, request as undiciRequest } from "undici";
import { refusalFor, type Refusal } from "./address-guard";
import { checkUrl, refused, timeoutResult } from "./fetch";
import { DEFAULT_TIMEOUT_MS, resultOfStatus, type Outbound, type OutboundRequest, type OutboundResult } from "./types";

export interface NodeOutboundOptions {
  allowPrivate?: boolean;
  timeoutMs?: number;
  /** Resolver (tests pass one that answers private addresses for public-looking names). */
  resolve?: (hostname: string) => Promise<Array<{ address: string; family: number }>>;
}

export class RefusedAddress extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.reason);
  }
}

const systemResolve = (hostname: string) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export function guardedLookup(allowPrivate: boolean, resolve: NonNullable<NodeOutboundOptions["resolve"]>): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
        for (const a of addresses) {
          const refusal = refusalFor(a.address, allowPrivate);
          if (refusal) return callback(new RefusedAddress(refusal), "", 0);
        }
        if (wanted.length === 0) return callback(Object.assign(new Error("no address"), { code: "ENOTFOUND" }), "", 0);
        if (options.all) return (callback as unknown as (e: null, a: typeof wanted) => void)(null, wanted);
        callback(null, wanted[0]!.address, wanted[0]!.family);
      },
      (e: NodeJS.ErrnoException) => callback(e, "", 0),
    );
  };
}

// Response bodies are drained (to keep the connection) up to this size, then the connection is dropped.
const MAX_DRAINED_BODY = 64 * 1024;
/** Kept-alive connections per destination origin. */
const CONNECTIONS_PER_ORIGIN = 64;

/** The guard's refusal behind an undici error (the lookup's error reaches the caller as it was thrown, or as its cause). */
function refusalIn(e: unknown): RefusedAddress | undefined {
  if (e instanceof RefusedAddress) return e;
  const cause = (e as { cause?: unknown } | null)?.cause;
  return cause instanceof RefusedAddress ? cause : undefined;
}

export function createNodeOutbound(options: NodeOutboundOptions = {}): Outbound {
  const allowPrivate = options.allowPrivate ?? false;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const lookup = guardedLookup(allowPrivate, options.resolve ?? systemResolve);
  // Kept-alive connections were checked when they were opened (the lookup runs per connection). Redirects are
  // never followed: undici's request does not follow them unless told to.
  const dispatcher = new Agent({
    connections: CONNECTIONS_PER_ORIGIN,
    keepAliveTimeout: 30_000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: { lookup, timeout: timeoutMs },
  });
  return {
    async send(request: OutboundRequest): Promise<OutboundResult> {
      // Literal addresses never reach the lookup: checkUrl refuses them.
      const url = checkUrl(request.url, allowPrivate);
      if (!(url instanceof URL)) return url;
      // The whole exchange up to the answer's head, connecting included.
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await undiciRequest(url, { method: request.method ?? "POST", headers: request.headers, body: request.body, dispatcher, signal });
        const retryAfter = res.headers["retry-after"];
        // The body is never stored or echoed: drained and dropped (a large one closes the connection).
        res.body.dump({ limit: MAX_DRAINED_BODY }).catch(() => {});
        return resultOfStatus(res.statusCode, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
      } catch (e) {
        const refusal = refusalIn(e);
        if (refusal) return refused(refusal.refusal);
        if (signal.aborted || e instanceof errors.HeadersTimeoutError || e instanceof errors.ConnectTimeoutError) return timeoutResult(timeoutMs);
        const code = (e as NodeJS.ErrnoException).code ?? (e as { cause?: NodeJS.ErrnoException }).cause?.code;
        return { ok: false, retryable: true, error: `Could not connect to the destination${code && !code.startsWith("UND_ERR") ? ` (${code})` : ""}` };
      }
    },
  };
}
