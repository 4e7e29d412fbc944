/**
 * Upgrades through the edge, on real sockets: a tunnel opens only after the
 * app's 101. An app that answers an upgrade request with anything else has that
 * answer relayed, the client's connection is closed, and bytes the client sent
 * after the upgrade request (a request to a denied path, say) never reach the
 * app. A real WebSocket still echoes both ways, and a client's own
 * X-Forwarded-For/-Proto are replaced on an upgrade as on any request.
 */
import { createServer, type IncomingMessage } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable, EDGE_CHANNEL, type RouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer } from "../../functions/self-hosted/http-server";
import { listenPgliteChannel, type Stoppable } from "../../shared/db/listen";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { deployments, environments, organizations, projects, routeRules } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { useCleanups } from "../support/cleanups";
import { storedRequestLines } from "../support/request-lines";

const SHARED = "apps.test";
const { cleanups } = useCleanups("edge-upgrade-");
const UPGRADE_HEAD = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

/** An app that does not switch protocols: every request (an upgrade request too) is recorded and answered `status`. */
async function startPlainApp(status: number) {
  const seen: { url: string; headers: IncomingMessage["headers"] }[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? "", headers: req.headers });
    // No Content-Length: the answer is chunked to the edge, which must still frame it for the client.
    res.writeHead(status, { "content-type": "text/plain", "x-app": "plain" });
    res.end(`app answered ${req.url}`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { port: (server.address() as AddressInfo).port, seen };
}

/** A WebSocket app: echoes each message prefixed, and records the upgrade requests it saw. */
async function startWebSocketApp() {
  const seen: IncomingMessage["headers"][] = [];
  const server = createServer((_req, res) => res.end("ok"));
  const wss = new WebSocketServer({ server });
  wss.on("connection", (ws, req) => {
    seen.push(req.headers);
    ws.on("message", (data) => ws.send(`echo:${data.toString()}`));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => {
    for (const client of wss.clients) client.terminate();
    wss.close();
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { port: (server.address() as AddressInfo).port, seen };
}

interface Seeded {
  orgId: string;
  projectId: string;
  host: string;
}

async function seedDeployed(db: Db, port: number): Promise<Seeded> {
  const orgId = newId("org");
  const projectId = newId("prj");
  const slug = `up-${projectId.slice(-10)}`;
  const environmentId = newId("env");
  await db.insert(organizations).values({ id: orgId, name: "Upgrade test" });
  await db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
  await db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
  await db
    .insert(deployments)
    .values({ id: newId("dpl"), orgId, projectId, environmentId, status: "ready", current: true, port, servedBy: "test", source: "git" });
  return { orgId, projectId, host: `${slug}.${SHARED}` };
}

/** Writes `text` on a new connection to the edge and collects everything until the edge closes it. */
function exchange(edgePort: number, text: string, thenWrite?: string) {
  return new Promise<{ text: string; closed: boolean }>((resolve, reject) => {
    const socket = connect(edgePort, "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => {
      received += d;
      // A second request written once the answer arrived, on the same connection.
      if (thenWrite && received.includes("\r\n\r\n") && !socket.writableEnded) {
        socket.write(thenWrite, () => {});
        thenWrite = undefined;
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => resolve({ text: received, closed: true }));
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`the edge kept the connection open; received: ${received}`));
    }, 5000).unref();
    socket.write(text);
  });
}

async function within(ms: number, check: () => Promise<boolean>): Promise<void> {
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`not within ${ms} ms`);
}

describe("edge upgrades (PGlite)", () => {
  let database: PgliteDatabase;
  let current: RouteTable | undefined;
  let feed: Stoppable;
  beforeAll(async () => {
    database = await openPglite({});
    feed = await listenPgliteChannel(database.client, EDGE_CHANNEL, { onMessage: (id) => current?.changed(id) });
  });
  afterAll(async () => {
    await feed.stop();
    await database.close();
  });

  async function startEdge() {
    const db = database.db;
    const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
    current = table;
    const logs = createRequestLogWriter({ db, logger: silentLogger });
    const edge = createEdge({ db, table, logs, logger: silentLogger, trustedProxies: [], holdMs: 1500, touchEveryMs: 1000, apiHosts: [...LOOPBACK_HOSTS] });
    const http = await bindHttpServer({ port: 0, host: "127.0.0.1" });
    http.serve(() => new Response("the api"), edge);
    cleanups.push(async () => {
      edge.stop();
      await http.close();
      table.stop();
      await logs.flush();
    });
    return { port: http.port, table, logs };
  }

  const requestLines = (projectId: string) => storedRequestLines(database.db, projectId);

  for (const status of [200, 400, 426]) {
    it(`an app answering ${status} to an upgrade: the client gets that answer, the connection closes, and nothing after it reaches the app`, async () => {
      const edge = await startEdge();
      const app = await startPlainApp(status);
      const s = await seedDeployed(database.db, app.port);
      // /admin is denied to this client: a request to it must never reach the app, however it is sent.
      const deny = { mode: "deny", cidrs: ["127.0.0.0/8"] } as never;
      await database.db
        .insert(routeRules)
        .values({ id: newId("rr"), orgId: s.orgId, projectId: s.projectId, kind: "allow-deny", path: "/admin", config: deny });
      await edge.table.settled();
      await within(1000, async () => (edge.table.lookup(s.host)?.rules.length ?? 0) === 1 && edge.table.lookup(s.host)?.deployment?.port === app.port);

      const smuggled = `GET /admin HTTP/1.1\r\nHost: ${s.host}\r\n\r\n`;
      // The denied request written in the same packet as the upgrade request, and again once the answer came.
      const result = await exchange(edge.port, `GET /socket HTTP/1.1\r\nHost: ${s.host}\r\n${UPGRADE_HEAD}\r\n${smuggled}`, smuggled);
      expect(result.closed).toBe(true);
      expect(result.text.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
      const head = result.text.slice(0, result.text.indexOf("\r\n\r\n")).toLowerCase();
      expect(head).toContain("x-app: plain");
      expect(head).toContain("connection: close");
      expect(head).not.toContain("upgrade:");
      expect(result.text.endsWith("app answered /socket")).toBe(true);
      // Exactly one answer: nothing after the upgrade request was read as a request.
      expect(result.text.match(/HTTP\/1\.1 /g)).toHaveLength(1);

      await new Promise((r) => setTimeout(r, 200));
      expect(app.seen.map((r) => r.url)).toEqual(["/socket"]);

      // The refused upgrade is logged with the app's status.
      await edge.logs.flush();
      await within(2000, async () => (await requestLines(s.projectId)).some((l) => l.path === "/socket"));
      const lines = await requestLines(s.projectId);
      expect(lines.map((l) => l.status)).toEqual([status]);
      expect(lines[0]!).toMatchObject({ method: "GET", host: s.host, path: "/socket", status, clientAddress: "127.0.0.1" });
    });
  }

  it("a real WebSocket is tunnelled after the app's 101 and echoes both ways; the client's own X-Forwarded-For/-Proto do not reach the app", async () => {
    const edge = await startEdge();
    const app = await startWebSocketApp();
    const s = await seedDeployed(database.db, app.port);
    await edge.table.settled();
    await within(1000, async () => edge.table.lookup(s.host)?.deployment?.port === app.port);

    const ws = new WebSocket(`ws://127.0.0.1:${edge.port}/live`, {
      headers: { host: s.host, "x-forwarded-for": "6.6.6.6", "x-forwarded-proto": "https" },
    });
    cleanups.push(() => ws.terminate());
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    const replies: string[] = [];
    ws.on("message", (data) => replies.push(data.toString()));
    ws.send("one");
    ws.send("two");
    await within(2000, async () => replies.length === 2);
    expect(replies).toEqual(["echo:one", "echo:two"]);

    expect(app.seen).toHaveLength(1);
    expect(app.seen[0]!["x-forwarded-for"]).toBe("127.0.0.1");
    expect(app.seen[0]!["x-forwarded-proto"]).toBe("http");
    expect(app.seen[0]!["x-forwarded-host"]).toBe(s.host);

    await edge.logs.flush();
    await within(2000, async () => (await requestLines(s.projectId)).length === 1);
    expect((await requestLines(s.projectId))[0]!).toMatchObject({ path: "/live", status: 101 });
  });
});
