/**
 * The self-hosted edge in front of real loopback apps: Host routing (free route,
 * preview, connected domain, everything else to the API), forwarding headers and
 * hop-by-hop handling, streaming both ways in constant memory, a client that goes
 * away, WebSocket upgrades, the edge's own 404/502/503 pages, route rules, the
 * request log line, and a change reaching the route table within a second on
 * PGlite and on Postgres with two tables (two adapter processes' worth).
 */
import { createHash } from "node:crypto";
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createLogWriter } from "../../functions/logs/writer";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable, EDGE_CHANNEL, type RouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer, type BoundServer } from "../../functions/self-hosted/http-server";
import { listenPgliteChannel, listenPostgresChannel, type Stoppable } from "../../shared/db/listen";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { deployments, domains, environments, logLines, organizations, projects, routeRules } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { parseCidr } from "../../shared/net/cidr";
import { useCleanups } from "../support/cleanups";

const SHARED = "apps.test";
const { cleanups } = useCleanups("edge-");

/** A loopback app: echoes what it received, streams, counts uploads, hangs, upgrades. */
async function startApp(name: string) {
  const seen: { closedEarly: number } = { closedEarly: 0 };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/big") {
      const mb = Number(url.searchParams.get("mb") ?? "1");
      const chunk = Buffer.alloc(1024 * 1024, 97);
      let sent = 0;
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(mb * chunk.length) });
      const pump = () => {
        while (sent < mb) {
          sent++;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end();
      };
      pump();
      return;
    }
    if (url.pathname === "/upload") {
      let bytes = 0;
      req.on("data", (c: Buffer) => {
        bytes += c.length;
      });
      req.on("end", () => res.end(JSON.stringify({ bytes })));
      return;
    }
    if (url.pathname === "/hang") {
      req.socket.once("close", () => seen.closedEarly++);
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("started\n");
      return;
    }
    res.writeHead(200, { "content-type": "application/json", connection: "keep-alive", "keep-alive": "timeout=77", "x-app": name });
    res.end(JSON.stringify({ app: name, method: req.method, url: req.url, headers: req.headers }));
  });
  server.on("upgrade", (req: IncomingMessage, socket: Socket) => {
    const key = req.headers["sec-websocket-key"] as string;
    const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nx-app: ${name}\r\n\r\n`);
    // Echo raw bytes back (enough to prove both directions pass).
    socket.on("data", (d) => socket.write(d));
    socket.on("end", () => socket.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return { server, port: (server.address() as AddressInfo).port, seen };
}

interface Seeded {
  orgId: string;
  projectId: string;
  slug: string;
  productionId: string;
  previewId: string;
}

async function seedProject(db: Db): Promise<Seeded> {
  const orgId = newId("org");
  const projectId = newId("prj");
  const slug = `edge-${projectId.slice(-10)}`;
  await db.insert(organizations).values({ id: orgId, name: "Edge test" });
  await db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
  const productionId = newId("env");
  const previewId = newId("env");
  await db.insert(environments).values([
    { id: productionId, orgId, projectId, name: "production", kind: "production" },
    { id: previewId, orgId, projectId, name: "staging", kind: "preview", branch: "staging" },
  ]);
  return { orgId, projectId, slug, productionId, previewId };
}

async function deploy(db: Db, s: Seeded, environmentId: string, port: number): Promise<string> {
  const id = newId("dpl");
  await db.transaction(async (tx) => {
    await tx.update(deployments).set({ current: false }).where(eq(deployments.environmentId, environmentId));
    await tx
      .insert(deployments)
      .values({ id, orgId: s.orgId, projectId: s.projectId, environmentId, status: "ready", current: true, port, servedBy: "test", source: "git" });
  });
  return id;
}

/** An HTTP/1.1 request to the edge with a given Host, answered as text. */
function get(edgePort: number, host: string, path = "/", headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: IncomingMessage["headers"]; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: edgePort, path, headers: { host, ...headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

interface EdgeServer {
  port: number;
  table: RouteTable;
  db: Db;
}

async function startEdge(db: Db, listen: (table: RouteTable) => Promise<Stoppable>, trusted: string[] = []): Promise<EdgeServer> {
  const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
  const feed = await listen(table);
  const logs = createLogWriter({ db, logger: silentLogger });
  const edge = createEdge({ db, table, logs, logger: silentLogger, trustedProxies: trusted.map((t) => parseCidr(t)!), holdMs: 1500, touchEveryMs: 1000 });
  const http: BoundServer = await bindHttpServer({ port: 0, host: "127.0.0.1" });
  http.serve(() => new Response("the api", { headers: { "x-api": "1" } }), edge);
  cleanups.push(async () => {
    await http.close();
    await feed.stop();
    table.stop();
    await logs.flush();
  });
  return { port: http.port, table, db };
}

/** Polls `check` until it holds or `ms` pass; returns the time it took. */
async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (await check().catch(() => false)) return performance.now() - start;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`not within ${ms} ms`);
}

describe("edge on PGlite", () => {
  let database: PgliteDatabase;
  let edge: EdgeServer;
  // One LISTEN for the file, feeding the table of the test running (PGlite does not LISTEN again after an UNLISTEN on the same client).
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
  const start = async (trusted: string[] = []) => {
    edge = await startEdge(database.db, async () => ({ stop: async () => {} }), trusted);
    current = edge.table;
    return edge;
  };

  it("routes the free route, a preview and a connected domain to their current deployments; any other Host is the API", async () => {
    await start();
    const s = await seedProject(database.db);
    const prod = await startApp("prod");
    const preview = await startApp("preview");
    await deploy(database.db, s, s.productionId, prod.port);
    await deploy(database.db, s, s.previewId, preview.port);
    await database.db.insert(domains).values({ id: newId("dom"), orgId: s.orgId, projectId: s.projectId, hostname: `www.${s.slug}.example` });
    await edge.table.settled();
    await within(1000, async () => (await get(edge.port, `${s.slug}.${SHARED}`)).status === 200);
    const free = await get(edge.port, `${s.slug.toUpperCase()}.${SHARED}:8080`, "/hello?token=secret");
    expect(JSON.parse(free.body)).toMatchObject({ app: "prod", url: "/hello?token=secret" });
    expect(JSON.parse((await get(edge.port, `${s.slug}--staging.${SHARED}`)).body).app).toBe("preview");
    await within(1000, async () => (await get(edge.port, `www.${s.slug}.example`)).headers["x-app"] === "prod");
    const api = await get(edge.port, "127.0.0.1");
    expect(api.body).toBe("the api");
    expect((await get(edge.port, `unknown.${SHARED}`)).body).toBe("the api");
  });

  it("sets X-Forwarded-*, drops hop-by-hop headers both ways and a client's own X-Forwarded-For", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("a");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    const res = await get(edge.port, host, "/", {
      connection: "keep-alive, x-hop",
      "x-hop": "must not pass",
      "keep-alive": "timeout=9",
      "proxy-authorization": "Basic x",
      "x-forwarded-for": "203.0.113.66",
      "x-end-to-end": "passes",
    });
    const seen = JSON.parse(res.body).headers;
    expect(seen["x-forwarded-for"]).toBe("127.0.0.1");
    expect(seen["x-forwarded-host"]).toBe(host);
    expect(seen["x-forwarded-proto"]).toBe("http");
    expect(seen.host).toBe(host);
    expect(seen["x-end-to-end"]).toBe("passes");
    for (const h of ["x-hop", "keep-alive", "proxy-authorization"]) expect(seen[h], h).toBeUndefined();
    // The app's own Keep-Alive header does not reach the client.
    expect(res.headers["keep-alive"]).not.toBe("timeout=77");
    expect(res.headers["x-app"]).toBe("a");
  });

  it("answers its own pages: nothing deployed 404, disabled 503, an app that does not answer 502", async () => {
    await start();
    const s = await seedProject(database.db);
    const host = `${s.slug}.${SHARED}`;
    await edge.table.settled();
    await within(1000, async () => (await get(edge.port, host)).headers["x-workspace-edge"] === "not_deployed");
    const none = await get(edge.port, host);
    expect(none.status).toBe(404);
    expect(none.body).toMatch(/Nothing deployed/);
    // A port nobody listens on.
    const gone = await startApp("gone");
    await new Promise<void>((r) => gone.server.close(() => r()));
    await deploy(database.db, s, s.productionId, gone.port);
    await within(1000, async () => (await get(edge.port, host)).status === 502);
    expect((await get(edge.port, host)).headers["x-workspace-edge"]).toBe("bad_gateway");
    await database.db.update(projects).set({ disabledAt: new Date() }).where(eq(projects.id, s.projectId));
    await within(1000, async () => (await get(edge.port, host)).status === 503);
    expect((await get(edge.port, host)).headers["x-workspace-edge"]).toBe("disabled");
  });

  it("holds a request while the current deployment is starting (no port yet) and sends it once it listens; too long is 503 with Retry-After", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("late");
    const host = `${s.slug}.${SHARED}`;
    const id = newId("dpl");
    await database.db.insert(deployments).values({
      id,
      orgId: s.orgId,
      projectId: s.projectId,
      environmentId: s.productionId,
      status: "ready",
      current: true,
      port: null,
      source: "git",
    });
    await within(1000, async () => edge.table.lookup(host)?.deployment?.id === id);
    const waited = get(edge.port, host, "/held");
    await new Promise((r) => setTimeout(r, 300));
    await database.db.update(deployments).set({ port: app.port }).where(eq(deployments.id, id));
    const res = await waited;
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ app: "late", url: "/held" });

    await database.db.update(deployments).set({ port: null }).where(eq(deployments.id, id));
    await within(1000, async () => edge.table.lookup(host)?.deployment?.port === null);
    const started = performance.now();
    const late = await get(edge.port, host);
    expect(late.status).toBe(503);
    expect(late.headers["x-workspace-edge"]).toBe("waking");
    expect(late.headers["retry-after"]).toBe("5");
    expect(performance.now() - started).toBeGreaterThanOrEqual(1400);
  });

  it("a deploy or promote reaches the route table within a second", async () => {
    await start();
    const s = await seedProject(database.db);
    const one = await startApp("one");
    const two = await startApp("two");
    const host = `${s.slug}.${SHARED}`;
    await deploy(database.db, s, s.productionId, one.port);
    await within(1000, async () => (await get(edge.port, host)).headers["x-app"] === "one");
    await deploy(database.db, s, s.productionId, two.port);
    const took = await within(1000, async () => (await get(edge.port, host)).headers["x-app"] === "two");
    expect(took).toBeLessThan(1000);
  });

  it("streams a large download and a large upload without buffering them", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("big");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    const rssBefore = process.memoryUsage().rss;
    const downloaded = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port: edge.port, path: "/big?mb=512", headers: { host } }, (res) => {
        let n = 0;
        res.on("data", (c: Buffer) => {
          n += c.length;
        });
        res.on("end", () => resolve(n));
      });
      req.on("error", reject);
      req.end();
    });
    expect(downloaded).toBe(512 * 1024 * 1024);
    const uploaded = await new Promise<string>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port: edge.port, path: "/upload", method: "POST", headers: { host } }, (res) => {
        let body = "";
        res.on("data", (c) => {
          body += c;
        });
        res.on("end", () => resolve(body));
      });
      req.on("error", reject);
      const chunk = Buffer.alloc(1024 * 1024, 98);
      let left = 128;
      const pump = () => {
        while (left > 0) {
          left--;
          if (!req.write(chunk)) return void req.once("drain", pump);
        }
        req.end();
      };
      pump();
    });
    expect(JSON.parse(uploaded).bytes).toBe(128 * 1024 * 1024);
    // The test process holds the client, the edge and the app: 640 MB passed through; buffering either body would keep at least 512 MB.
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(192 * 1024 * 1024);
  });

  it("a client that goes away releases the upstream request", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("hang");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    await new Promise<void>((resolve) => {
      const req = httpRequest({ host: "127.0.0.1", port: edge.port, path: "/hang", headers: { host } }, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
      });
      req.end();
    });
    await within(2000, async () => app.seen.closedEarly === 1);
  });

  it("passes a WebSocket upgrade through and echoes both ways", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("ws");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    const socket = connect(edge.port, "127.0.0.1");
    const received: Buffer[] = [];
    socket.on("data", (d) => received.push(d));
    socket.write(
      `GET /socket HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    await within(2000, async () => Buffer.concat(received).toString().includes("\r\n\r\n"));
    const head = Buffer.concat(received).toString();
    expect(head).toMatch(/^HTTP\/1.1 101/);
    expect(head).toMatch(/s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=/);
    expect(head.toLowerCase()).toContain("x-app: ws");
    received.length = 0;
    socket.write("ping-through-the-edge");
    await within(2000, async () => Buffer.concat(received).toString() === "ping-through-the-edge");
    socket.destroy();
  });

  it("applies route rules in order (ban, allow-deny, rate limit) and logs each request with the rule that acted, without the query", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("ruled");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    const rule = (kind: "ban" | "allow-deny" | "rate-limit", config: Record<string, unknown>, path: string | null = null) =>
      database.db.insert(routeRules).values({ id: newId("rr"), orgId: s.orgId, projectId: s.projectId, kind, path, config: config as never });
    await rule("rate-limit", { limit: 2, windowSeconds: 60, by: "ip" }, "/limited");
    await rule("ban", { cidr: "127.0.0.0/8", expiresAt: null, reason: null }, "/banned/**");
    await rule("allow-deny", { mode: "allow", cidrs: ["10.0.0.0/8"] }, "/private");
    await within(1000, async () => (await get(edge.port, host, "/banned/x")).status === 403);
    expect((await get(edge.port, host, "/banned/x")).headers["x-workspace-edge"]).toBe("banned");
    expect((await get(edge.port, host, "/private")).headers["x-workspace-edge"]).toBe("denied");
    expect((await get(edge.port, host, "/open")).status).toBe(200);
    expect((await get(edge.port, host, "/limited?a=1")).status).toBe(200);
    expect((await get(edge.port, host, "/limited")).status).toBe(200);
    const limited = await get(edge.port, host, "/limited?key=hunter2");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers["retry-after"])).toBeGreaterThan(0);
    expect(limited.headers["ratelimit-limit"]).toBe("2");
    expect(limited.headers["ratelimit-remaining"]).toBe("0");
    // An expired ban no longer applies.
    await database.db
      .update(routeRules)
      .set({ config: { cidr: "127.0.0.0/8", expiresAt: new Date(Date.now() - 1000).toISOString(), reason: null } })
      .where(eq(routeRules.kind, "ban"));
    await within(1000, async () => (await get(edge.port, host, "/banned/x")).status === 200);

    await within(2000, async () => {
      const lines = await database.db.select().from(logLines).where(eq(logLines.projectId, s.projectId));
      return lines.some((l) => l.fields?.status === 429);
    });
    const lines = await database.db.select().from(logLines).where(eq(logLines.projectId, s.projectId));
    expect(lines.every((l) => l.kind === "request")).toBe(true);
    const refused = lines.find((l) => l.fields?.status === 429)!;
    expect(refused.fields).toMatchObject({ method: "GET", host, path: "/limited", status: 429, clientAddress: "127.0.0.1", environment: "production" });
    expect(refused.fields!.rule).toMatch(/^rr_/);
    expect(typeof refused.fields!.durationMs).toBe("number");
    expect(typeof refused.fields!.bytes).toBe("number");
    expect(JSON.stringify(lines)).not.toContain("hunter2");
  });

  it("reads X-Forwarded-For only from a trusted proxy, so a client cannot spoof its way past a ban", async () => {
    await start(["127.0.0.1/32"]);
    const s = await seedProject(database.db);
    const app = await startApp("proxied");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await database.db.insert(routeRules).values({
      id: newId("rr"),
      orgId: s.orgId,
      projectId: s.projectId,
      kind: "ban",
      path: null,
      config: { cidr: "203.0.113.0/24", expiresAt: null, reason: null },
    });
    await within(1000, async () => (await get(edge.port, host, "/", { "x-forwarded-for": "203.0.113.5" })).status === 403);
    const passed = await get(edge.port, host, "/", { "x-forwarded-for": "198.51.100.1, 127.0.0.1" });
    expect(passed.status).toBe(200);
    expect(JSON.parse(passed.body).headers["x-forwarded-for"]).toBe("198.51.100.1, 127.0.0.1, 198.51.100.1");
  });
});

describe.runIf(inject("pgKind") === "postgres")("edge on Postgres with two adapter processes' route tables", () => {
  let one: PostgresDatabase;
  let two: PostgresDatabase;
  beforeAll(async () => {
    one = await openPostgres(inject("pgUrl"), { migrate: false, max: 4 });
    two = await openPostgres(inject("pgUrl"), { migrate: false, max: 4 });
  });
  afterAll(async () => {
    await one.close();
    await two.close();
  });

  it("a change made through one process reaches both within a second, and a rate limit is counted once across them", async () => {
    const listen = (table: RouteTable) => listenPostgresChannel(inject("pgUrl"), EDGE_CHANNEL, { onMessage: table.changed, onActive: table.setActive });
    const a = await startEdge(one.db, listen);
    const b = await startEdge(two.db, listen);
    const s = await seedProject(one.db);
    const v1 = await startApp("v1");
    const v2 = await startApp("v2");
    const host = `${s.slug}.${SHARED}`;
    await deploy(one.db, s, s.productionId, v1.port);
    await within(1000, async () => (await get(a.port, host)).headers["x-app"] === "v1" && (await get(b.port, host)).headers["x-app"] === "v1");
    await deploy(one.db, s, s.productionId, v2.port);
    await within(1000, async () => (await get(a.port, host)).headers["x-app"] === "v2" && (await get(b.port, host)).headers["x-app"] === "v2");

    await one.db.insert(routeRules).values({
      id: newId("rr"),
      orgId: s.orgId,
      projectId: s.projectId,
      kind: "rate-limit",
      path: "/counted",
      config: { limit: 10, windowSeconds: 60, by: "ip" },
    });
    await within(1000, async () => {
      const [ra, rb] = [a.table.lookup(host), b.table.lookup(host)];
      return (ra?.rules.length ?? 0) === 1 && (rb?.rules.length ?? 0) === 1;
    });
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => get(i % 2 ? a.port : b.port, host, "/counted")));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(10);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(20);
  });
});
