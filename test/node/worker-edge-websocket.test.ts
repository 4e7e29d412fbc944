/**
 * WebSockets through the Worker's forwarding (functions/worker-edge.ts), end to end over real
 * sockets: a client (the `ws` package) opens a WebSocket to an app's free route on the Worker,
 * run by workerd through Miniflare (test/support/cloud-worker.ts); the Worker forwards the
 * upgrade, signed, to a build server's edge (createServerEdge, as `wsp runner` runs it) in front
 * of an app of this file (node:http and `ws`): messages flow both ways, either side closes with
 * its code and reason, and the Worker writes one request line (status 101). An app that answers
 * an upgrade without switching protocols gets its answer relayed, and no tunnel opens. An
 * unsigned upgrade straight to the server's edge is refused (403 `not_forwarded`).
 *
 * A Node test rather than one in the worker project: workerd under vitest does open the outbound
 * WebSocket, but its harness calls the Worker's `fetch` in the test's own isolate, so a test there
 * would accept the server's socket itself and never exercise the runtime relaying the Worker's
 * 101 answer to a client.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { createServerEdge } from "../../functions/self-hosted/edge/server-edge";
import { setServing } from "../../functions/self-hosted/runner/store";
import { createServer as registerServer, updateServer } from "../../functions/servers/store";
import { deployments, environments, organizations, projects, users } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { deriveEdgeKey, FORWARD_HEADER_NAMES } from "../../shared/net/edge-forward";
import { useCloudWorker } from "../support/cloud-worker";
import { storedRequestLines } from "../support/request-lines";

const cloud = useCloudWorker({ databasePrefix: "wsfwd" });

interface AppUpgrade {
  url: string;
  host: string | undefined;
  forwardedFor: string | undefined;
  extensions: string | undefined;
  wspHeaders: string[];
}

/** An app that echoes WebSocket messages; `close:<code>` makes it close; /no-switch and /missing answer the upgrade with 200 and 404. */
async function startApp() {
  const upgrades: AppUpgrade[] = [];
  const closes: Array<{ code: number; reason: string }> = [];
  const app = createServer((_req, res) => res.end("plain"));
  // Subprotocols: the app picks `chat` when offered. Under /deflate/, it accepts permessage-deflate (browsers always offer it).
  const handleProtocols = (offered: Set<string>) => (offered.has("chat") ? "chat" : false);
  const wss = new WebSocketServer({ noServer: true, handleProtocols });
  const deflating = new WebSocketServer({ noServer: true, handleProtocols, perMessageDeflate: { threshold: 0 } });
  app.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    upgrades.push({
      url: req.url ?? "",
      host: req.headers.host,
      forwardedFor: req.headers["x-forwarded-for"] as string | undefined,
      extensions: req.headers["sec-websocket-extensions"],
      wspHeaders: Object.keys(req.headers).filter((h) => h.startsWith("x-wsp-")),
    });
    const plain = (status: string, body: string) =>
      socket.end(`HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    if (req.url === "/no-switch") return plain("200 OK", "no tunnel here");
    if (req.url === "/missing") return plain("404 Not Found", "no such socket");
    const server = req.url?.startsWith("/deflate/") ? deflating : wss;
    server.handleUpgrade(req, socket, head, (ws) => {
      ws.on("message", (data) => {
        const text = data.toString();
        const close = /^close:(\d+)$/.exec(text);
        if (close) ws.close(Number(close[1]), "the app closes");
        else ws.send(`echo:${text}`);
      });
      ws.on("close", (code, reason) => closes.push({ code, reason: reason.toString() }));
    });
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  return { app, servers: [wss, deflating], port: (app.address() as AddressInfo).port, upgrades, closes };
}

let app: Awaited<ReturnType<typeof startApp>>;
let front: Server;
let edgeUrl: string;
let host: string;
let projectId: string;
let deploymentId: string;

beforeAll(async () => {
  if (!cloud.db) return; // no Postgres: useCloudWorker skips every test
  app = await startApp();
  const orgId = newId("org");
  const userId = newId("usr");
  await cloud.db.insert(organizations).values({ id: orgId, name: "WebSocket forwarding" });
  await cloud.db.insert(users).values({ id: userId, email: `${userId}@example.test`, name: "Admin" });
  const { row: server, token } = await registerServer(cloud.db, cloud.keyring, { orgId, userId, name: "box" }, new Date());
  deploymentId = newId("dpl");
  // The server's edge, as `wsp runner` starts it on its public port.
  const edge = createServerEdge({ edgeKey: await deriveEdgeKey(token), portOf: (id) => (id === deploymentId ? app.port : undefined), holdMs: 2_000 });
  front = createServer((req, res) => edge.handle(req, res));
  front.on("upgrade", (req, socket, head) => edge.upgrade(req, socket as Socket, head));
  await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
  edgeUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  await updateServer(cloud.db, orgId, server.id, { publicUrl: edgeUrl }, new Date());
  projectId = newId("prj");
  const slug = `ws-${projectId.slice(-10).toLowerCase()}`;
  const environmentId = newId("env");
  await cloud.db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
  await cloud.db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
  await cloud.db
    .insert(deployments)
    .values({ id: deploymentId, orgId, projectId, environmentId, status: "ready", current: true, source: "git", placement: "server", serverId: server.id });
  await setServing(cloud.db, deploymentId, server.id, app.port, new Date());
  host = `${slug}.${cloud.sharedDomain}`;
});

afterAll(async () => {
  for (const wss of app?.servers ?? []) {
    for (const c of wss.clients) c.terminate();
    wss.close();
  }
  for (const s of [front, app?.app]) {
    if (!s) continue;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

const wsUrl = (path: string) => `${cloud.url.replace(/^http/, "ws")}${path}`;

/** Opens a WebSocket to the app's free route through the Worker. */
function open(path: string, protocols: string[] = []): Promise<WebSocket> {
  const ws = new WebSocket(wsUrl(path), protocols, { headers: { host } });
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve(ws));
    ws.once("unexpected-response", (_req, res) => reject(new Error(`answered ${res.statusCode} instead of 101`)));
    ws.once("error", reject);
  });
}

const next = (ws: WebSocket) => new Promise<string>((r) => ws.once("message", (d) => r(d.toString())));
const closed = (ws: WebSocket) =>
  new Promise<{ code: number; reason: string }>((r) => ws.once("close", (code, reason) => r({ code, reason: reason.toString() })));

/** The upgrade answered without a tunnel: its status, headers and body. */
function refused(url: string, headers: Record<string, string>): Promise<{ status: number; headers: IncomingMessage["headers"]; body: string }> {
  const ws = new WebSocket(url, { headers });
  return new Promise((resolve, reject) => {
    ws.once("open", () => reject(new Error("a tunnel opened")));
    ws.once("error", reject);
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => {
        body += c.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
  });
}

async function requestLines() {
  return storedRequestLines(cloud.db, projectId);
}

describe("WebSockets through the Worker's forwarding to a build server", () => {
  it("a WebSocket reaches the app through the Worker and the server's edge, signed; messages flow both ways; the client closes", async () => {
    const ws = await open("/ws/chat?room=1");
    const upgrade = app.upgrades.at(-1)!;
    // The server's edge verified the Worker's signature and sent the app the original Host; no x-wsp-* header reaches it.
    expect(upgrade).toMatchObject({ url: "/ws/chat?room=1", host });
    expect(upgrade.wspHeaders).toEqual([]);
    expect(upgrade.forwardedFor).toBeTruthy();

    for (const text of ["hello", "ünïcödé", "x".repeat(200_000)]) {
      ws.send(text);
      expect(await next(ws)).toBe(`echo:${text}`);
    }
    ws.send(Buffer.from([0, 1, 2, 255]));
    expect(await next(ws)).toBe(`echo:${Buffer.from([0, 1, 2, 255]).toString()}`);

    const clientSide = closed(ws);
    const appClosed = app.closes.length;
    ws.close(4000, "the client closes");
    expect(await clientSide).toMatchObject({ code: 4000 });
    await expect.poll(() => app.closes.length, { timeout: 10_000 }).toBe(appClosed + 1);
    expect(app.closes.at(-1)).toEqual({ code: 4000, reason: "the client closes" });

    // One request line, as for HTTP: the app's 101, logged when the tunnel opened (no bytes counted through it).
    const lines = (await requestLines()).filter((l) => l.path === "/ws/chat");
    expect(lines).toEqual([expect.objectContaining({ method: "GET", host, status: 101, bytes: 0, deploymentId })]);
  });

  it("the app closes: the client gets its code and reason", async () => {
    const ws = await open("/ws/closing");
    ws.send("ping");
    expect(await next(ws)).toBe("echo:ping");
    const clientSide = closed(ws);
    ws.send("close:4001");
    expect(await clientSide).toEqual({ code: 4001, reason: "the app closes" });
  });

  it("the subprotocol the app picks reaches the client; an app accepting permessage-deflate works through the Worker", async () => {
    const chat = await open("/ws/protocols", ["superchat", "chat"]);
    expect(chat.protocol).toBe("chat");
    chat.send("with a protocol");
    expect(await next(chat)).toBe("echo:with a protocol");
    chat.close();

    const ws = await open("/deflate/chat");
    const upgrade = app.upgrades.at(-1)!;
    // Each hop negotiates its own: workerd offers permessage-deflate to the app, which takes it, and to the client.
    expect(upgrade.extensions).toContain("permessage-deflate");
    for (const text of ["compressed", "y".repeat(300_000)]) {
      ws.send(text);
      expect(await next(ws)).toBe(`echo:${text}`);
    }
    const clientSide = closed(ws);
    ws.close(1000, "done");
    expect(await clientSide).toMatchObject({ code: 1000 });
  });

  it("an app that answers an upgrade without switching protocols gets its answer relayed, and no tunnel opens", async () => {
    const ok = await refused(wsUrl("/no-switch"), { host });
    expect(ok.status).toBe(200);
    expect(ok.body).toBe("no tunnel here");
    const missing = await refused(wsUrl("/missing"), { host });
    expect(missing.status).toBe(404);
    expect(missing.body).toBe("no such socket");
    await expect
      .poll(async () => (await requestLines()).filter((l) => l.path === "/no-switch" || l.path === "/missing").map((l) => [l.path, l.status, l.bytes]), {
        timeout: 10_000,
      })
      .toEqual(
        expect.arrayContaining([
          ["/no-switch", 200, "no tunnel here".length],
          ["/missing", 404, "no such socket".length],
        ]),
      );
  });

  it("an unsigned upgrade straight to the server's edge is refused (403), however it names the app", async () => {
    const before = app.upgrades.length;
    const forged = Object.fromEntries([...FORWARD_HEADER_NAMES].map((name) => [name, "forged"]));
    for (const headers of [{ host }, { host, ...forged, "x-wsp-forwarded-host": host, "x-wsp-deployment": deploymentId }]) {
      const answer = await refused(`${edgeUrl.replace(/^http/, "ws")}/ws/direct`, headers);
      expect(answer.status).toBe(403);
      expect(answer.headers["x-workspace-edge"]).toBe("not_forwarded");
    }
    expect(app.upgrades.length).toBe(before);
  });
});
