/**
 * The git client's transport on the Node adapter: `node:http`/`node:https`
 * with the outbound guard's DNS lookup, so every address a host name resolves
 * to is checked when the connection opens (private and loopback refused unless
 * OUTBOUND_ALLOW_PRIVATE; link-local and metadata always), as for webhooks.
 * Redirects are not followed; the response body streams to the caller, which
 * caps what it reads.
 */
import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import { refusalMessage } from "../outbound/address-guard";
import { checkUrl } from "../outbound/fetch";
import { guardedLookup, type NodeOutboundOptions, RefusedAddress } from "../outbound/node";
import { type GitFetch, GitFetchRefused } from "./fetch";

export interface NodeGitFetchOptions {
  allowPrivate?: boolean;
  /** Resolver (tests pass one that answers private addresses for public-looking names). */
  resolve?: NodeOutboundOptions["resolve"];
}

const systemResolve = (hostname: string) => dns.promises.lookup(hostname, { all: true, verbatim: true });

// Statuses whose responses carry no body (the Response constructor refuses one).
const NO_BODY = new Set([101, 103, 204, 205, 304]);

export function createNodeGitFetch(options: NodeGitFetchOptions = {}): GitFetch {
  const allowPrivate = options.allowPrivate ?? false;
  const lookup = guardedLookup(allowPrivate, options.resolve ?? systemResolve);
  // Protocol v2 makes two requests in a row: keep the connection between them.
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: 16, maxFreeSockets: 4, timeout: 30_000 }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: 16, maxFreeSockets: 4, timeout: 30_000 }),
  };
  return (raw, init) => {
    const url = checkUrl(raw, allowPrivate);
    if (!(url instanceof URL)) return Promise.reject(new GitFetchRefused(url.ok ? "refused" : url.error));
    const lib = url.protocol === "https:" ? https : http;
    return new Promise<Response>((resolve, reject) => {
      if (init.signal.aborted) return reject(init.signal.reason);
      const req = lib.request(
        url,
        {
          method: init.method,
          headers: { ...init.headers, ...(init.body ? { "content-length": String(init.body.byteLength) } : {}) },
          lookup,
          agent: agents[url.protocol as "http:" | "https:"],
        },
        (res) => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined) continue;
            for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
          }
          const status = res.statusCode ?? 502;
          if (NO_BODY.has(status)) {
            res.resume();
            return resolve(new Response(null, { status, headers }));
          }
          resolve(new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, headers }));
        },
      );
      const onAbort = () => req.destroy(init.signal.reason instanceof Error ? init.signal.reason : new Error("aborted"));
      init.signal.addEventListener("abort", onAbort, { once: true });
      req.on("close", () => init.signal.removeEventListener("abort", onAbort));
      req.on("error", (e) => {
        reject(e instanceof RefusedAddress ? new GitFetchRefused(refusalMessage(e.refusal)) : e);
      });
      req.end(init.body);
    });
  };
}
