/**
 * The self-hosted HTTP listener around @hono/node-server's request listener.
 *
 * Bound before anything else starts, so a taken port is reported before a data
 * directory, an owner or a token is created; requests that arrive while the
 * service is still starting get 503.
 *
 * Early answers: a route may answer before it has read the whole request body
 * (413 on an oversized upload or JSON body). Such an answer says
 * `Connection: close` (the connection cannot carry another request), and the
 * socket then lingers as nginx's lingering_close does: our side is half-closed
 * after the answer, and what the client still sends is read and discarded for up
 * to LINGER_MS / LINGER_BYTES before the socket is closed. Closing at once with
 * unread bytes makes the kernel send a reset, and a client that has not read the
 * answer yet loses it (and @hono/node-server on its own drops the socket 500 ms
 * after an early answer while advertising keep-alive).
 *
 * Timeouts: Node's `requestTimeout` (300 s for a whole request) is off, since a
 * slow upload through the edge may rightly take longer. What is bounded is
 * idleness: the request head must come within HEADERS_TIMEOUT_MS of its first
 * byte (or of the connection, when nothing is sent; checked every
 * CHECK_INTERVAL_MS, so a half-open head is closed within about 11 s), a
 * keep-alive connection is closed after KEEP_ALIVE_TIMEOUT_MS without a next
 * request, and a request body that stalls (no byte for BODY_IDLE_TIMEOUT_MS
 * while the server is reading it) is closed; a body that keeps coming, however
 * slowly, is never cut. A body the server is not reading (an app slow to read
 * its upload holds it back) is not the client's stall and is not timed out.
 * Connections per client address are capped (connection-guard.ts).
 * close() lets requests in flight finish for the grace period, then cuts every
 * connection, upgraded ones (WebSockets through the edge) included: those are
 * no longer the HTTP server's, so they are tracked here.
 */
import { getRequestListener } from "@hono/node-server";
import { RequestIdResponse } from "./request-id-response";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Cidr } from "../../shared/net/cidr";
import { type ConnectionGuard, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, guardConnections } from "./connection-guard";

/** How long, and how many bytes, an early-answered request's body is still read and discarded. */
export const LINGER_MS = 5_000;
export const LINGER_BYTES = 64 * 1024 * 1024;

/** How long close() lets in-flight requests finish before cutting their connections. */
export const CLOSE_GRACE_MS = 10_000;

/** The request head must be complete this long after its first byte (or after the connection opened). */
export const HEADERS_TIMEOUT_MS = 10_000;
/** How often Node checks connections against HEADERS_TIMEOUT_MS (its default, 30 s, would let a head hang for 40 s). */
export const CHECK_INTERVAL_MS = 1_000;
/** An idle keep-alive connection is closed after this long without a next request (Node's default). */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** A request body that the server is reading and from which no byte arrives for this long is closed. */
export const BODY_IDLE_TIMEOUT_MS = 60_000;

export interface Timeouts {
  headersMs: number;
  keepAliveMs: number;
  bodyIdleMs: number;
  /** Node's connectionsCheckingInterval: the granularity of headersMs. */
  checkIntervalMs: number;
}

export class PortInUseError extends Error {}

type Fetch = (request: Request, env: { incoming: IncomingMessage; outgoing: ServerResponse }) => Response | Promise<Response>;

/** Takes requests (and upgrades) meant for deployed apps before the API sees them (functions/self-hosted/edge). */
export interface EdgeHandler {
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): boolean;
}

export interface BoundServer {
  server: Server;
  port: number;
  /** Open connections per client address (MAX_CONNECTIONS_PER_CLIENT). */
  connections: ConnectionGuard;
  /** Starts serving the app (and the edge, when given); until then requests are answered 503. */
  serve(fetch: Fetch, edge?: EdgeHandler): void;
  close(): Promise<void>;
}

interface Lingering {
  ms: number;
  bytes: number;
  /** Sockets lingering now: closing the server ends them at once (their answer is sent). */
  sockets: Set<Socket>;
}

/** Half-closes the socket and discards what the client still sends, within the bounds. */
function linger(socket: Socket, req: IncomingMessage, limits: Lingering) {
  if (limits.sockets.has(socket) || socket.destroyed) return;
  limits.sockets.add(socket);
  const close = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(close, limits.ms);
  timer.unref();
  socket.once("close", () => {
    clearTimeout(timer);
    limits.sockets.delete(socket);
  });
  // The answer is sent, so nobody wants the rest of the body: drop the readers the app left
  // attached (a web-stream adapter would buffer it, or pause the request and stall the drain).
  req.removeAllListeners("data");
  req.removeAllListeners("readable");
  let bytes = 0;
  req.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > limits.bytes) close();
  });
  // The whole body arrived: nothing is left unread, so closing sends no reset (once our answer is flushed).
  req.once("end", () => (socket.writableFinished ? close() : socket.once("finish", close)));
  req.once("error", close);
  socket.end();
  req.resume();
}

/**
 * Whether the request has a body (a length other than 0, or chunked). One without is complete once its head is,
 * even when answered before Node's parser has marked it so (a synchronous answer): no early answer, keep-alive holds.
 */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** Marks an answer written before its request body was fully read, and arms the lingering close. */
function guardEarlyAnswer(req: IncomingMessage, res: ServerResponse, limits: Lingering) {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const socket = req.socket;
    if (!req.complete && hasBody(req) && socket && !socket.destroyed && !res.headersSent) {
      // Node then sends `Connection: close` and ends the connection after this answer...
      res.shouldKeepAlive = false;
      // ...through socket.destroySoon(), as does @hono/node-server's drain timer: both linger instead.
      socket.destroySoon = () => linger(socket, req, limits);
    }
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof res.writeHead;
}

/**
 * Closes the connection when the request body stalls: no byte read from the socket for `ms` while the body is
 * incomplete and the server is reading it (checked every ms/4, so within 1.25 × ms). While the socket or the
 * request is paused, its reader (an app slow to take its upload) holds the body back, not the client: not a stall.
 * Requests without a body are not watched; the watch ends when the body is complete or the request closes.
 */
function watchBody(req: IncomingMessage, ms: number) {
  const socket = req.socket;
  if (ms <= 0 || !socket || socket.destroyed || !hasBody(req)) return;
  let seen = socket.bytesRead;
  let idleSince = performance.now();
  const timer = setInterval(
    () => {
      if (req.complete || socket.destroyed) return void clearInterval(timer);
      const now = performance.now();
      if (socket.bytesRead !== seen || socket.isPaused() || req.isPaused()) {
        seen = socket.bytesRead;
        idleSince = now;
      } else if (now - idleSince >= ms) {
        clearInterval(timer);
        socket.destroy();
      }
    },
    Math.max(1, Math.floor(ms / 4)),
  );
  timer.unref();
  req.once("close", () => clearInterval(timer));
}

const STARTING = JSON.stringify({
  type: "about:blank",
  title: "Service Unavailable",
  status: 503,
  detail: "The service is starting; retry in a moment",
});

/**
 * Binds host:port (PortInUseError when taken) and returns the server; the app is attached later with serve().
 * `linger` overrides the lingering bounds (tests).
 */
export async function bindHttpServer(opts: {
  port: number;
  host: string;
  linger?: { ms: number; bytes: number };
  /** How long close() waits for connections in flight (default CLOSE_GRACE_MS; tests). */
  closeGraceMs?: number;
  /** MAX_CONNECTIONS_PER_CLIENT (default 256). */
  maxConnectionsPerClient?: number;
  /** TRUSTED_PROXIES: peers whose connections are not capped. */
  trustedProxies?: Cidr[];
  /** Overrides of the connection timeouts (tests). */
  timeouts?: Partial<Timeouts>;
}): Promise<BoundServer> {
  const limits: Lingering = { ...(opts.linger ?? { ms: LINGER_MS, bytes: LINGER_BYTES }), sockets: new Set() };
  const timeouts: Timeouts = {
    headersMs: HEADERS_TIMEOUT_MS,
    keepAliveMs: KEEP_ALIVE_TIMEOUT_MS,
    bodyIdleMs: BODY_IDLE_TIMEOUT_MS,
    checkIntervalMs: CHECK_INTERVAL_MS,
    ...opts.timeouts,
  };
  let listener: ((req: IncomingMessage, res: ServerResponse) => Promise<void>) | undefined;
  let edge: EdgeHandler | undefined;
  const server = createServer({ connectionsCheckingInterval: timeouts.checkIntervalMs, ServerResponse: RequestIdResponse }, (req, res) => {
    firstHeadCame(req.socket);
    watchBody(req, timeouts.bodyIdleMs);
    if (edge?.handle(req, res)) return;
    guardEarlyAnswer(req, res, limits);
    if (listener) return void listener(req, res);
    res.writeHead(503, { "content-type": "application/problem+json", "retry-after": "1" }).end(STARTING);
  });
  // A whole request may take as long as its body takes (a slow upload through the edge); the head must still come within headersTimeout.
  server.requestTimeout = 0;
  server.headersTimeout = timeouts.headersMs;
  server.keepAliveTimeout = timeouts.keepAliveMs;
  // Node's headersTimeout counts from a head's first byte: a connection that sends nothing at all is closed by
  // its socket's idle timeout (Node destroys a timed-out socket nobody handles), cleared once its first head is in.
  const silent = new WeakSet<Socket>();
  const firstHeadCame = (socket: Socket) => {
    if (silent.delete(socket)) socket.setTimeout(0);
  };
  server.on("connection", (socket: Socket) => {
    if (timeouts.headersMs <= 0 || socket.destroyed) return;
    silent.add(socket);
    socket.setTimeout(timeouts.headersMs);
  });
  const connections = guardConnections(server, {
    maxPerClient: opts.maxConnectionsPerClient ?? DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    trustedProxies: opts.trustedProxies ?? [],
  });
  // Sockets taken over by an upgrade: server.closeAllConnections() no longer sees them.
  const upgraded = new Set<Socket>();
  await new Promise<void>((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException) => {
      const where = `${opts.host}:${opts.port}`;
      if (e.code === "EADDRINUSE")
        reject(new PortInUseError(`Port ${opts.port} is already in use (${where}); set PORT to a free port, or stop the process using it.`));
      else if (e.code === "EACCES") reject(new PortInUseError(`Not allowed to listen on ${where}; set PORT to a port above 1023, or grant the privilege.`));
      else if (e.code === "EADDRNOTAVAIL") reject(new PortInUseError(`Cannot listen on ${where}: no such address on this machine; check HOST.`));
      else reject(e);
    };
    server.once("error", onError);
    server.listen(opts.port, opts.host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    connections,
    serve(fetch, appEdge) {
      listener = getRequestListener(fetch as Parameters<typeof getRequestListener>[0], { hostname: opts.host });
      edge = appEdge;
      // The API has no upgrade routes: an upgrade that is not an app's is refused by closing the socket.
      server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
        firstHeadCame(socket);
        upgraded.add(socket);
        socket.once("close", () => upgraded.delete(socket));
        if (!edge?.upgrade(req, socket, head)) socket.destroy();
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        for (const socket of limits.sockets) socket.destroy();
        // In-flight requests finish; a proxied stream that would not (a long download, an open WebSocket) is cut after the grace period.
        setTimeout(() => {
          server.closeAllConnections();
          for (const socket of upgraded) socket.destroy();
        }, opts.closeGraceMs ?? CLOSE_GRACE_MS).unref();
      }),
  };
}
