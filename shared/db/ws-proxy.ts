/**
 * A WebSocket-to-TCP proxy standing in for Neon's, so the Neon serverless driver
 * (the cloud Worker's) reaches a local Postgres in development and tests.
 * Path `/v1?address=host:port`; only loopback targets are accepted.
 */
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import net from "node:net";
import type { AddressInfo } from "node:net";

// In a vitest globalSetup, `import "ws"` resolves the browser build; require the Node one.
const { WebSocketServer } = createRequire(import.meta.url)("ws") as typeof import("ws");

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1"]);

export interface WsProxy {
  url: string;
  close(): Promise<void>;
}

export async function startWsProxy(port = 0, host = "127.0.0.1"): Promise<WsProxy> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(426).end("WebSocket upgrade required\n");
  });
  const wss = new WebSocketServer({ server });
  wss.on("connection", (socket, req) => {
    const address = new URL(req.url ?? "/", "http://proxy").searchParams.get("address") ?? "";
    const sep = address.lastIndexOf(":");
    const targetHost = address.slice(0, sep);
    const targetPort = Number(address.slice(sep + 1));
    if (!LOOPBACK.has(targetHost) || !Number.isInteger(targetPort)) {
      socket.close(1008, "only loopback targets are allowed");
      return;
    }
    const tcp = net.connect(targetPort, targetHost);
    tcp.on("data", (chunk) => socket.readyState === socket.OPEN && socket.send(chunk));
    tcp.on("error", () => socket.close());
    tcp.on("close", () => socket.close());
    socket.on("message", (data) => tcp.write(data as Buffer));
    socket.on("close", () => tcp.destroy());
    socket.on("error", () => tcp.destroy());
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
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
