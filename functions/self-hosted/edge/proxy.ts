/**
 * Proxies one request to an app on loopback, streaming both ways (pipe with
 * backpressure: a 1 GB download or a slow upload passes in constant memory).
 * Hop-by-hop headers (RFC 9110 §7.6.1: Connection and every header it names,
 * Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade) are not
 * forwarded in either direction; `X-Forwarded-For/-Proto/-Host` are set; the
 * Host header is passed as the client sent it. A client that goes away destroys
 * the upstream request, so the app sees the disconnect.
 *
 * Framing (framing.ts decided it is unambiguous): the body goes to the app framed
 * the way it came, chunked as chunked (stated explicitly: Node frames a piped
 * body on GET, DELETE or OPTIONS with nothing otherwise), a Content-Length as
 * received, no body as none. An upstream connection returns to the pool only
 * after a whole, well-framed exchange: an app that answers before the body was
 * all sent, or whose answer's framing is doubtful, loses its connection.
 *
 * The upstream is an app's port on loopback, or (forwarding to a build server,
 * issue 22) a server's edge at its public URL: the request then goes there with
 * the server's Host and the signed headers (shared/net/edge-forward.ts) instead
 * of the `X-Forwarded-*` ones, under the same framing rules both ways. The
 * signed headers a client sent itself are never passed on, to an app or a server.
 */
import { type ClientRequest, type IncomingMessage, request as httpRequest, type RequestOptions, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction, Socket } from "node:net";
import { FORWARD_HEADER_NAMES } from "../../../shared/net/edge-forward";
import type { BodyFraming } from "./framing";
import { sendPage, sendPageOnSocket } from "./pages";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);
const FORWARDED = new Set(["x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "forwarded", ...FORWARD_HEADER_NAMES]);
/** An app that accepted the connection but sends no response head within this is answered 502. */
export const UPSTREAM_HEADERS_TIMEOUT_MS = 60_000;
/** After one side of an upgraded connection ends, how long the other may still send before both close. */
const UPGRADE_END_GRACE_MS = 1_000;

export interface Forwarding {
  /** The client address as the edge decided it (see client-address.ts). */
  clientAddress: string;
  /** X-Forwarded-For as received, kept only when the peer is a trusted proxy (its chain continues). */
  forwardedFor?: string;
  proto: "http" | "https";
  /** The Host the app gets, when it is not the request's own (a server's edge passes the one the forwarding edge received). */
  host?: string;
}

/** Where a request goes: an app's port on loopback, or a build server's edge (its public URL's origin) with the signed headers. */
/** `lookup`: the outbound guard's resolution of the server's name (functions/servers/forward-lookup-node.ts), so only checked addresses are connected to. */
export type Upstream = number | { origin: URL; signed: Record<string, string>; lookup?: LookupFunction };

const NO_TOKENS: ReadonlySet<string> = new Set();

/**
 * Tokens of the Connection header(s) that are not hop-by-hop anyway: the extra names to drop. A shared
 * empty set when there is none, as for nearly every message (no Connection, or `keep-alive`/`close`,
 * whose tokens name no header or one dropped already): no allocation per request.
 */
function connectionTokens(raw: string[]): ReadonlySet<string> {
  let tokens: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // "connection".length: most names are not, and need no lower-casing to tell.
    if (name.length !== 10 || name.toLowerCase() !== "connection") continue;
    const value = raw[i + 1]!.toLowerCase();
    if (value === "keep-alive" || value === "close") continue;
    for (const t of value.split(",")) {
      const token = t.trim();
      if (HOP_BY_HOP.has(token)) continue;
      tokens ??= new Set();
      tokens.add(token);
    }
  }
  return tokens ?? NO_TOKENS;
}

/** Raw header pairs without hop-by-hop ones (and without forwarding headers, which are rewritten). `keep` names hop-by-hop headers to keep (an upgrade's). */
function endToEnd(raw: string[], keep: ReadonlySet<string> = NO_TOKENS): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!keep.has(name) && (HOP_BY_HOP.has(name) || named.has(name))) continue;
    if (FORWARDED.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** `headers` without Host, then `host` first. */
function replaceHost(headers: string[], host: string): string[] {
  const out = ["Host", host];
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() !== "host") out.push(headers[i]!, headers[i + 1]!);
  return out;
}

function withForwarding(headers: string[], req: IncomingMessage, f: Forwarding): string[] {
  const chain = f.forwardedFor ? `${f.forwardedFor}, ${f.clientAddress}` : f.clientAddress;
  const host = f.host ?? req.headers.host;
  const out = [...(f.host ? replaceHost(headers, f.host) : headers), "X-Forwarded-For", chain, "X-Forwarded-Proto", f.proto];
  if (host) out.push("X-Forwarded-Host", host);
  return out;
}

/** The request to the upstream: the app on loopback with the forwarding headers, or a server's edge with its own Host and the signed headers. */
function openUpstream(
  upstream: Upstream,
  req: IncomingMessage,
  target: string,
  headers: string[],
  f: Forwarding,
  options: Pick<RequestOptions, "timeout" | "agent">,
): ClientRequest {
  if (typeof upstream === "number") {
    const all = withForwarding(headers, req, f) as unknown as Record<string, string>;
    return httpRequest({ host: "127.0.0.1", port: upstream, method: req.method, path: target, headers: all, ...options });
  }
  const { origin, signed, lookup } = upstream;
  const all = replaceHost(headers, origin.host);
  for (const [name, value] of Object.entries(signed)) all.push(name, value);
  const send = origin.protocol === "https:" ? httpsRequest : httpRequest;
  return send({
    protocol: origin.protocol,
    hostname: origin.hostname.replace(/^\[|\]$/g, ""),
    port: origin.port || undefined,
    ...(lookup ? { lookup } : {}),
    method: req.method,
    path: target,
    headers: all as unknown as Record<string, string>,
    ...options,
  });
}

export interface ProxyResult {
  status: number;
  bytes: number;
  /** The edge answered 502 itself (the app did not answer). */
  badGateway: boolean;
}

/** An answer whose length can be read two ways (several Content-Lengths or Transfer-Encodings, or both kinds): not relayed. */
function ambiguousAnswer(raw: string[]): boolean {
  let lengths = 0;
  let codings = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === "content-length") lengths++;
    else if (name === "transfer-encoding") codings++;
  }
  return lengths > 1 || codings > 1 || (lengths > 0 && codings > 0);
}

/**
 * `target`: the request target sent to the app (the edge's normalized path and the original query, see request-path.ts).
 * `body`: how the request's body is framed (framing.ts).
 */
export function proxyHttp(
  req: IncomingMessage,
  res: ServerResponse,
  upstreamTo: Upstream,
  target: string,
  f: Forwarding,
  body: BodyFraming,
): Promise<ProxyResult> {
  return new Promise((resolve) => {
    let bytes = 0;
    let settled = false;
    const done = (r: ProxyResult) => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    const headers = endToEnd(req.rawHeaders);
    if (body === "chunked") headers.push("Transfer-Encoding", "chunked");
    const upstream = openUpstream(upstreamTo, req, target, headers, f, { timeout: UPSTREAM_HEADERS_TIMEOUT_MS });
    // Once the app's answer is complete nothing more can go wrong on this exchange (its connection is pooled or destroyed).
    let answered = false;
    const fail = () => {
      upstream.destroy();
      if (answered) return;
      if (!res.headersSent) done({ status: 502, bytes: sendPage(res, "bad_gateway"), badGateway: true });
      else {
        res.destroy();
        done({ status: res.statusCode, bytes, badGateway: false });
      }
    };
    upstream.on("error", fail);
    upstream.on("timeout", fail);
    upstream.on("response", (answer) => {
      // Streaming may take as long as it takes: the timeout guarded the wait for the head only.
      upstream.setTimeout(0);
      if (ambiguousAnswer(answer.rawHeaders)) return fail();
      // The app answered before it had the whole body: the rest of the client's body is read and
      // dropped (the client's connection stays framed), and the app's connection is not reused.
      const early = !upstream.writableFinished;
      if (early) {
        req.unpipe(upstream);
        req.resume();
      }
      answer.once("end", () => {
        answered = true;
        if (early) upstream.destroy();
      });
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.rawHeaders));
      answer.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
      });
      answer.pipe(res);
      answer.on("error", () => res.destroy());
      res.on("finish", () => done({ status: answer.statusCode ?? 502, bytes, badGateway: false }));
    });
    // The client went away (or the answer is complete): release the upstream side.
    res.on("close", () => {
      if (!res.writableFinished) {
        upstream.destroy();
        done({ status: 499, bytes, badGateway: false });
      }
    });
    if (body === "none") upstream.end();
    else req.pipe(upstream);
  });
}

/** The head of an answer written on a raw socket (the client's upgraded connection, where no ServerResponse exists). */
function answerHead(status: number, message: string | undefined, headers: string[]): string {
  let text = `HTTP/1.1 ${status} ${message ?? ""}\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${text}\r\n`;
}

/**
 * A WebSocket (or any HTTP/1.1 upgrade). The request head goes to the app over
 * a new connection with Upgrade/Connection kept and the edge's own forwarding
 * headers. Only an app's `101` opens a tunnel (both sockets piped until either
 * closes), and only then do the client's bytes after the head reach the app.
 * Any other answer is relayed as a plain response with `Connection: close` and
 * the client's connection is ended: bytes the client sent after the upgrade
 * request are never read as requests, so nothing passes the rules or the log.
 */
export function proxyUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, upstreamTo: Upstream, target: string, f: Forwarding): Promise<ProxyResult> {
  return new Promise((resolve) => {
    let bytes = 0;
    let settled = false;
    const done = (r: ProxyResult) => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    const keep = new Set(["upgrade", "connection"]);
    const upstream = openUpstream(upstreamTo, req, target, endToEnd(req.rawHeaders, keep), f, { timeout: UPSTREAM_HEADERS_TIMEOUT_MS, agent: false });
    let answered = false;
    const fail = () => {
      upstream.destroy();
      if (answered) socket.destroy();
      else {
        sendPageOnSocket(socket, "bad_gateway");
        done({ status: 502, bytes: 0, badGateway: true });
      }
    };
    upstream.on("error", fail);
    upstream.on("timeout", fail);
    // The client went away before the app answered.
    socket.on("close", () => {
      upstream.destroy();
      done({ status: 499, bytes, badGateway: false });
    });
    socket.on("error", () => socket.destroy());

    upstream.on("upgrade", (answer: IncomingMessage, appSocket: Socket, appHead: Buffer) => {
      answered = true;
      // A tunnel may idle as long as its two ends like: the head's timeout must not follow the socket into it.
      upstream.off("timeout", fail);
      appSocket.setTimeout(0);
      socket.write(answerHead(101, answer.statusMessage, endToEnd(answer.rawHeaders, keep)));
      if (appHead.length > 0) socket.write(appHead);
      if (head.length > 0) appSocket.write(head);
      appSocket.pipe(socket);
      socket.pipe(appSocket);
      appSocket.on("error", () => socket.destroy());
      socket.on("close", () => appSocket.destroy());
      appSocket.on("close", () => socket.destroy());
      // Either side ending ends the tunnel: the other side is ended (pipe does that) and both are
      // destroyed shortly after, since the server's sockets are half-open and would otherwise linger.
      const finish = () =>
        setTimeout(() => {
          socket.destroy();
          appSocket.destroy();
        }, UPGRADE_END_GRACE_MS).unref();
      socket.once("end", finish);
      appSocket.once("end", finish);
      done({ status: 101, bytes: 0, badGateway: false });
    });

    upstream.on("response", (answer) => {
      upstream.setTimeout(0);
      if (ambiguousAnswer(answer.rawHeaders)) return fail();
      answered = true;
      const status = answer.statusCode ?? 502;
      // Without a Content-Length the body ends where the connection does (the chunked framing was undone by the parser).
      socket.write(answerHead(status, answer.statusMessage, [...endToEnd(answer.rawHeaders), "Connection", "close"]));
      answer.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
        if (!socket.write(chunk)) answer.pause();
      });
      socket.on("drain", () => answer.resume());
      answer.on("error", fail);
      answer.on("end", () => {
        upstream.destroy();
        // What the client sent after the upgrade request is read and dropped until it closes, so the
        // answer is not cut by a reset; a client that keeps the connection open is closed shortly after.
        socket.end();
        socket.resume();
        setTimeout(() => socket.destroy(), UPGRADE_END_GRACE_MS).unref();
        done({ status, bytes, badGateway: false });
      });
    });
    upstream.end();
  });
}
