/**
 * Outbound HTTP on the Node adapter: `node:http`/`node:https` with a guarded DNS
 * lookup. Every address a host name resolves to is checked at connect time (so
 * a second, different DNS answer cannot slip past a check made earlier), and a
 * host resolving to any loopback or private address is refused unless the
 * operator allows private networks (OUTBOUND_ALLOW_PRIVATE); link-local and cloud
 * metadata addresses (and metadata server names) are refused even then.
 * Redirects are never followed, the whole exchange times out, and the response
 * body is discarded unread.
 */
import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
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

export function createNodeOutbound(options: NodeOutboundOptions = {}): Outbound {
  const allowPrivate = options.allowPrivate ?? false;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const lookup = guardedLookup(allowPrivate, options.resolve ?? systemResolve);
  // Kept-alive connections were checked when they were opened (the lookup runs per connection).
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 64, timeout: 30_000 }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 64, timeout: 30_000 }),
  };
  return {
    send(request: OutboundRequest): Promise<OutboundResult> {
      // Literal addresses never reach the lookup: checkUrl refuses them.
      const url = checkUrl(request.url, allowPrivate);
      if (!(url instanceof URL)) return Promise.resolve(url);
      const lib = url.protocol === "https:" ? https : http;
      return new Promise<OutboundResult>((resolve) => {
        let settled = false;
        const finish = (result: OutboundResult) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(result);
        };
        const req = lib.request(
          url,
          {
            method: request.method ?? "POST",
            headers: { ...request.headers, "content-length": String(Buffer.byteLength(request.body)) },
            lookup,
            agent: agents[url.protocol as "http:" | "https:"],
          },
          (res) => {
            const retryAfter = res.headers["retry-after"];
            finish(resultOfStatus(res.statusCode ?? 0, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter));
            // The body is never stored or echoed: drained and dropped (a large one closes the connection).
            let seen = 0;
            res.on("data", (chunk: Buffer) => {
              seen += chunk.length;
              if (seen > MAX_DRAINED_BODY) res.destroy();
            });
            res.on("error", () => {});
          },
        );
        const timer = setTimeout(() => {
          finish(timeoutResult(timeoutMs));
          req.destroy();
        }, timeoutMs);
        req.on("error", (e: NodeJS.ErrnoException) => {
          if (e instanceof RefusedAddress) return finish(refused(e.refusal));
          finish({ ok: false, retryable: true, error: `Could not connect to the destination${e.code ? ` (${e.code})` : ""}` });
        });
        req.end(request.body);
      });
    },
  };
}
