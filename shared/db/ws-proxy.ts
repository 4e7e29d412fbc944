/**
 * A WebSocket-to-TCP proxy standing in for Neon's, so the Neon serverless driver
 * (the cloud Worker's) reaches a local Postgres in development and tests.
 * Path `/v1?address=host:port`. It forwards to one configured database only, and
 * refuses at the upgrade (403) any connection a web page could open: a browser
 * always sends `Origin`, the Neon driver in Node and in workerd sends none.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createRequire } from "node:module";
import net from "node:net";
import type { AddressInfo } from "node:net";

// In a vitest globalSetup, `import "ws"` resolves the browser build; require the Node one.
const { WebSocketServer } = createRequire(import.meta.url)("ws") as typeof import("ws");

export interface ProxyTarget {
  host: string;
  port: number;
}

export interface WsProxyOptions {
  /** The only database the proxy forwards to (the host and port of DATABASE_URL). */
  target: ProxyTarget;
  /** Listen port (0: any free port) and address (loopback by default). */
  port?: number;
  host?: string;
}

export interface WsProxy {
  url: string;
  close(): Promise<void>;
}

const LOOPBACK_ORIGIN_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** `[::1]` and `::1` name the same host; hosts compare case-insensitively. */
function normalizeHost(host: string): string {
  const lower = host.toLowerCase();
  return lower.startsWith("[") && lower.endsWith("]") ? lower.slice(1, -1) : lower;
}

/** The host and port of a `postgres://` URL (port 5432 when absent). */
export function databaseTarget(databaseUrl: string): ProxyTarget {
  const url = new URL(databaseUrl);
  if (!url.hostname) throw new Error("The database URL has no host");
  return { host: normalizeHost(url.hostname), port: url.port ? Number(url.port) : 5432 };
}

/** `host:port` (IPv6 in brackets or bare, split at the last colon). */
export function parseTarget(text: string): ProxyTarget | null {
  const sep = text.lastIndexOf(":");
  if (sep <= 0) return null;
  const portText = text.slice(sep + 1);
  if (!/^[0-9]{1,5}$/.test(portText)) return null;
  const port = Number(portText);
  if (port < 1 || port > 65535) return null;
  return { host: normalizeHost(text.slice(0, sep)), port };
}

/** No Origin (not a browser), or a page served from this machine's loopback. */
export function originAllowed(origin: string | undefined): boolean {
  if (origin === undefined) return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return (url.protocol === "http:" || url.protocol === "https:") && LOOPBACK_ORIGIN_HOSTS.has(url.hostname);
}

function requestedTarget(req: IncomingMessage): ProxyTarget | null {
  const address = new URL(req.url ?? "/", "http://proxy").searchParams.get("address");
  return address === null ? null : parseTarget(address);
}

export async function startWsProxy(options: WsProxyOptions): Promise<WsProxy> {
  const target = { host: normalizeHost(options.target.host), port: options.target.port };
  const server: Server = createServer((_req, res) => {
    res.writeHead(426).end("WebSocket upgrade required\n");
  });
  const wss = new WebSocketServer({
    server,
    // Decided before the handshake completes: a refused page or target gets a plain 403.
    verifyClient: ({ req }, done) => {
      if (!originAllowed(req.headers.origin)) return done(false, 403, "Only non-browser clients and loopback origins");
      const wanted = requestedTarget(req);
      if (!wanted || wanted.host !== target.host || wanted.port !== target.port) {
        return done(false, 403, "Only the configured database");
      }
      done(true);
    },
  });
  wss.on("connection", (socket) => {
    const tcp = net.connect(target.port, target.host);
    tcp.on("data", (chunk) => socket.readyState === socket.OPEN && socket.send(chunk));
    tcp.on("error", () => socket.close());
    tcp.on("close", () => socket.close());
    socket.on("message", (data) => tcp.write(data as Buffer));
    socket.on("close", () => tcp.destroy());
    socket.on("error", () => tcp.destroy());
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, host, resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `ws://${host}:${bound}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  };
}
