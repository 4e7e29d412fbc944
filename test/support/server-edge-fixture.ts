/**
 * A build server's edge on loopback, as `wsp runner` runs it: createServerEdge in front
 * of a tiny real app (node:http, plus a WebSocket echo). The app answers every request
 * with what it received (method, target, Host, X-Forwarded-*, any x-wsp-* header left),
 * as JSON. Used by the server edge's own test, the self-hosted instance's forwarding
 * test and, through the worker project's global setup, the Worker's.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import type { WebSocketServer as WebSocketServerType } from "ws";
import { createServerEdge } from "../../functions/self-hosted/edge/server-edge";
import { deriveEdgeKey } from "../../shared/net/edge-forward";

export interface SeenRequest {
  method: string;
  url: string;
  host: string | null;
  forwardedFor: string | null;
  forwardedProto: string | null;
  forwardedHost: string | null;
  wspHeaders: string[];
  body: string;
}

export interface ServerEdgeFixture {
  /** `http://127.0.0.1:<port>`: the server's edge (its publicUrl). */
  url: string;
  appPort: number;
  /** deployment id → port (null: starting); what the supervisor would hold. */
  ports: Map<string, number | null>;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as AddressInfo).port;
}

export async function startServerEdgeFixture(runnerToken: string, deploymentIds: string[], holdMs = 2_000): Promise<ServerEdgeFixture> {
  const app = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const one = (v: string | string[] | undefined) => (typeof v === "string" ? v : null);
      const seen: SeenRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        host: one(req.headers.host),
        forwardedFor: one(req.headers["x-forwarded-for"]),
        forwardedProto: one(req.headers["x-forwarded-proto"]),
        forwardedHost: one(req.headers["x-forwarded-host"]),
        wspHeaders: Object.keys(req.headers).filter((h) => h.startsWith("x-wsp-")),
        body: Buffer.concat(chunks).toString("utf8"),
      };
      res.writeHead(200, { "content-type": "application/json", "x-app": "fixture" });
      res.end(JSON.stringify(seen));
    });
  });
  // Loaded through Node's own resolution: the worker project's loader resolves "ws" to its browser stub.
  const { WebSocketServer } = createRequire(import.meta.url)("ws") as { WebSocketServer: typeof WebSocketServerType };
  const wss = new WebSocketServer({ server: app });
  wss.on("connection", (ws) => ws.on("message", (data) => ws.send(`echo:${data.toString()}`)));
  const appPort = await listen(app);
  const ports = new Map<string, number | null>(deploymentIds.map((id) => [id, appPort]));
  const edge = createServerEdge({ edgeKey: await deriveEdgeKey(runnerToken), portOf: (id) => ports.get(id), holdMs });
  const front = createServer((req, res) => edge.handle(req, res));
  front.on("upgrade", (req, socket, head) => edge.upgrade(req, socket as import("node:net").Socket, head));
  const port = await listen(front);
  return {
    url: `http://127.0.0.1:${port}`,
    appPort,
    ports,
    async close() {
      for (const c of wss.clients) c.terminate();
      wss.close();
      for (const s of [front, app]) {
        s.closeAllConnections();
        await new Promise<void>((r) => s.close(() => r()));
      }
    },
  };
}
