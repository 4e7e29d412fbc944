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
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge, type Edge, NOT_DEPLOYED_READ_SPACING_MS } from "../../functions/self-hosted/edge/edge";
import { createRouteTable, EDGE_CHANNEL, type RouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer, type BoundServer } from "../../functions/self-hosted/http-server";
import { listenPgliteChannel, listenPostgresChannel, type Stoppable } from "../../shared/db/listen";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { deployments, domains, environments, logLines, organizations, projects, rateLimits, requestLogBatches, routeRules } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { parseCidr } from "../../shared/net/cidr";
import { useCleanups } from "../support/cleanups";
import { rawGet } from "../support/raw-http";
import { storedRequestLines } from "../support/request-lines";

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

/** An HTTP/1.1 request to the edge with a given Host, answered as text (`via`: the address to connect to). */
const get = (port: number, host: string, path = "/", headers: Record<string, string> = {}, via = "127.0.0.1") => rawGet(port, host, path, { headers, via });

interface EdgeServer {
  port: number;
  table: RouteTable;
  db: Db;
  http: BoundServer;
  edge: Edge;
}

interface EdgeOptions {
  trusted?: string[];
  apiHosts?: string[];
  pruneEveryMs?: number;
  /** Where to listen (default 127.0.0.1). */
  host?: string;
  closeGraceMs?: number;
}

async function startEdge(db: Db, listen: (table: RouteTable) => Promise<Stoppable>, opts: EdgeOptions = {}): Promise<EdgeServer> {
  const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
  const feed = await listen(table);
  const logs = createRequestLogWriter({ db, logger: silentLogger });
  const edge = createEdge({
    db,
    table,
    logs,
    logger: silentLogger,
    trustedProxies: (opts.trusted ?? []).map((t) => parseCidr(t)!),
    holdMs: 1500,
    touchEveryMs: 1000,
    apiHosts: [...LOOPBACK_HOSTS, ...(opts.apiHosts ?? [])],
    pruneEveryMs: opts.pruneEveryMs,
  });
  const http: BoundServer = await bindHttpServer({ port: 0, host: opts.host ?? "127.0.0.1", closeGraceMs: opts.closeGraceMs });
  http.serve(() => new Response("the api", { headers: { "x-api": "1" } }), edge);
  cleanups.push(async () => {
    edge.stop();
    await http.close();
    await feed.stop();
    table.stop();
    await logs.flush();
  });
  return { port: http.port, table, db, http, edge };
}

/** A request with a raw target (absolute-form, dot segments) sent verbatim on a socket; the answer's status and headers text. */
function raw(edgePort: number, host: string, target: string) {
  return new Promise<{ status: number; head: string; body: string }>((resolve, reject) => {
    const socket = connect(edgePort, "127.0.0.1");
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => {
      text += d;
    });
    socket.on("error", reject);
    socket.on("end", () => {
      const split = text.indexOf("\r\n\r\n");
      resolve({ status: Number(text.slice(9, 12)), head: text.slice(0, split).toLowerCase(), body: text.slice(split + 4) });
    });
    socket.write(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  });
}

type RuleKind = "ban" | "allow-deny" | "rate-limit";
async function addRule(db: Db, s: Seeded, kind: RuleKind, config: Record<string, unknown>, path: string | null = null): Promise<string> {
  const id = newId("rr");
  await db.insert(routeRules).values({ id, orgId: s.orgId, projectId: s.projectId, kind, path, config: config as never });
  return id;
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
  const start = async (trusted: string[] = [], opts: EdgeOptions = {}) => {
    edge = await startEdge(database.db, async () => ({ stop: async () => {} }), { ...opts, trusted });
    current = edge.table;
    return edge;
  };

  it("routes the free route, a preview and a connected domain to their current deployments; the API's names reach the API, any other Host the edge's 404", async () => {
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
    for (const host of ["127.0.0.1", "localhost:8787", "[::1]"]) {
      const api = await get(edge.port, host);
      expect(api.body, host).toBe("the api");
    }
    // A mistyped app name, an unknown domain: the edge's own 404, never the API or the console.
    for (const host of [`unknown.${SHARED}`, `${s.slug}-typo.${SHARED}`, "api.attacker.example", "10.0.0.9"]) {
      const res = await get(edge.port, host);
      expect(res.status, host).toBe(404);
      expect(res.headers["x-workspace-edge"], host).toBe("unknown_host");
      expect(res.headers["x-api"], host).toBeUndefined();
    }
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

  it("serves a deployment that became current before its notification reached the table, even right after a read of the project (nothing-deployed answers wait for a read begun after them)", async () => {
    // Both projects are in the table as it starts; it hears no notification from here on: only a re-read can show a deployment.
    const s = await seedProject(database.db);
    const t = await seedProject(database.db);
    await start();
    current = undefined;
    const app = await startApp("fresh");

    // Just read for an answer of nothing deployed; deployed a moment later; asked again at once.
    const host = `${s.slug}.${SHARED}`;
    expect((await get(edge.port, host)).headers["x-workspace-edge"]).toBe("not_deployed");
    await deploy(database.db, s, s.productionId, app.port);
    const first = await get(edge.port, host, "/first");
    expect(first.status).toBe(200);
    expect(JSON.parse(first.body)).toMatchObject({ app: "fresh", url: "/first" });

    // A read (a notification's) begun before the deployment became current, still under way or just ended.
    edge.table.changed(t.projectId);
    await deploy(database.db, t, t.productionId, app.port);
    const second = await get(edge.port, `${t.slug}.${SHARED}`, "/second");
    expect(second.status).toBe(200);
    expect(JSON.parse(second.body)).toMatchObject({ app: "fresh", url: "/second" });
  });

  it(`answers a flood of requests for a project with nothing deployed from one read per ${NOT_DEPLOYED_READ_SPACING_MS} ms`, async () => {
    // The database's selects, counted: one answer shows how many a read of the project takes.
    let selects = 0;
    const counted = new Proxy(database.db, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== "select") return value;
        return (...args: unknown[]) => {
          selects++;
          return value.apply(target, args);
        };
      },
    });
    const s = await seedProject(database.db);
    edge = await startEdge(counted, async () => ({ stop: async () => {} }));
    current = undefined;
    const host = `${s.slug}.${SHARED}`;
    selects = 0;
    expect((await get(edge.port, host)).headers["x-workspace-edge"]).toBe("not_deployed");
    const perRead = selects;
    expect(perRead).toBeGreaterThan(0);

    selects = 0;
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 40 }, () => get(edge.port, host)));
    const took = performance.now() - started;
    expect(answers.map((a) => a.headers["x-workspace-edge"])).toEqual(Array(40).fill("not_deployed"));
    expect(selects % perRead).toBe(0);
    expect(selects / perRead).toBeGreaterThanOrEqual(1);
    expect(selects / perRead).toBeLessThanOrEqual(Math.ceil(took / NOT_DEPLOYED_READ_SPACING_MS) + 1);
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
    // All three rules are in the route table (each insert is its own notification and reload).
    await within(1000, async () => (await get(edge.port, host, "/private")).status === 403 && (await get(edge.port, host, "/banned/x")).status === 403);
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
      const lines = await storedRequestLines(database.db, s.projectId);
      return lines.some((l) => l.status === 429);
    });
    const lines = await storedRequestLines(database.db, s.projectId);
    // The edge writes request lines only (build and runtime lines are the runner's).
    expect(await database.db.select().from(logLines).where(eq(logLines.projectId, s.projectId))).toEqual([]);
    const refused = lines.find((l) => l.status === 429)!;
    expect(refused).toMatchObject({ method: "GET", host, path: "/limited", status: 429, clientAddress: "127.0.0.1", environment: "production" });
    expect(refused.rule).toMatch(/^rr_/);
    expect(typeof refused.durationMs).toBe("number");
    expect(typeof refused.bytes).toBe("number");
    expect(JSON.stringify(lines)).not.toContain("hunter2");
    const [stored] = await database.db.select({ lines: requestLogBatches.lines }).from(requestLogBatches).where(eq(requestLogBatches.projectId, s.projectId));
    expect(stored!.lines).not.toContain("hunter2");
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

  it("matches rules and logs on the normalized path: absolute-form, //, dot segments and escaped unreserved characters do not walk around a rule", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("norm");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    await addRule(database.db, s, "ban", { cidr: "127.0.0.0/8", expiresAt: null, reason: null }, "/admin");
    await within(1000, async () => (await get(edge.port, host, "/admin")).status === 403);
    for (const target of [
      `http://${host}/admin`,
      "//admin",
      "/./admin",
      "/a/../admin",
      "/../admin/x",
      "/%61dmin",
      "/%2e%2e/admin",
      "/x/%2E%2E/admin/",
      "///admin//panel",
      // An app that decodes %2F into a separator would route /admin/x: the rule applies to that form too.
      "/admin%2Fx",
      "/x%2F..%2Fadmin",
      // Servlet containers cut `;` parameters off segments.
      "/admin;jsessionid=1",
      "/public/..;/admin",
    ]) {
      const res = await raw(edge.port, host, target);
      expect(res.status, target).toBe(403);
      expect(res.head, target).toContain("x-workspace-edge: banned");
    }
    // An absolute-form target naming another host than Host is ambiguous: 400 before any rule (edge-framing.test.ts).
    expect((await raw(edge.port, host, "http://elsewhere.example/admin?x=1")).status).toBe(400);
    expect((await raw(edge.port, host, "/adminx")).status).toBe(200);
    expect((await raw(edge.port, host, "/x/admin")).status).toBe(200);
    // The app receives the normalized path with the original query.
    const seen = JSON.parse((await get(edge.port, host, "/a/./b/../%63ode//x?q=%2e%2e")).body);
    expect(seen.url).toBe("/a/code/x?q=%2e%2e");
    expect(JSON.parse((await get(edge.port, host, `http://${host}/abs?y=1`)).body).url).toBe("/abs?y=1");
    // The log line has the normalized path.
    await within(2000, async () => {
      const lines = await storedRequestLines(database.db, s.projectId);
      return lines.some((l) => l.path === "/a/code/x");
    });
    const lines = await storedRequestLines(database.db, s.projectId);
    const refused = lines.filter((l) => l.status === 403).map((l) => l.path);
    expect(refused).toContain("/admin");
    expect(refused).not.toContain("/a/../admin");
    expect(refused).not.toContain("/%61dmin");
    // A target longer than the edge takes: 414, before any rule or the app.
    const long = await raw(edge.port, host, `/${"a".repeat(9_000)}`);
    expect(long.status).toBe(414);
    expect(long.head).toContain("x-workspace-edge: too_long");
  });

  it("a crashed current deployment is answered 502 (the app is failing), not 404", async () => {
    await start();
    const s = await seedProject(database.db);
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
      crashedAt: new Date(),
      source: "git",
    });
    await within(1000, async () => edge.table.lookup(host)?.deployment?.id === id);
    const started = performance.now();
    const res = await get(edge.port, host);
    expect(res.status).toBe(502);
    expect(res.headers["x-workspace-edge"]).toBe("bad_gateway");
    // Answered at once, not held as if it were starting.
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("the API's own hostnames stay the API's even when a project's domain claims one", async () => {
    await start([], { apiHosts: ["API.Workspace.example:8443", `taken-free.${SHARED}`] });
    const s = await seedProject(database.db);
    const app = await startApp("squatter");
    await deploy(database.db, s, s.productionId, app.port);
    await database.db.insert(domains).values([
      { id: newId("dom"), orgId: s.orgId, projectId: s.projectId, hostname: "api.workspace.example" },
      { id: newId("dom"), orgId: s.orgId, projectId: s.projectId, hostname: `taken-free.${SHARED}` },
      { id: newId("dom"), orgId: s.orgId, projectId: s.projectId, hostname: `ok.${s.slug}.example` },
    ]);
    await within(1000, async () => (await get(edge.port, `ok.${s.slug}.example`)).headers["x-app"] === "squatter");
    expect(edge.table.lookup("api.workspace.example")?.projectId).toBe(s.projectId);
    for (const host of ["api.workspace.example", "API.WORKSPACE.EXAMPLE:80", "api.workspace.example.", `taken-free.${SHARED}`]) {
      const res = await get(edge.port, host);
      expect(res.body, host).toBe("the api");
      expect(res.headers["x-api"], host).toBe("1");
    }
  });

  it("rule order on one path: a ban decides before allow-deny, allow-deny before the rate limit; a deny refuses without counting", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("order");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    // Created in the opposite of the evaluation order, so creation order cannot be what decides.
    const limit = await addRule(database.db, s, "rate-limit", { limit: 1, windowSeconds: 60, by: "ip" }, "/x");
    const allow = await addRule(database.db, s, "allow-deny", { mode: "allow", cidrs: ["10.0.0.0/8"] }, "/x");
    const ban = await addRule(database.db, s, "ban", { cidr: "127.0.0.1", expiresAt: null, reason: null }, "/x");
    await within(1000, async () => (await get(edge.port, host, "/x")).headers["x-workspace-edge"] === "banned");
    await database.db.delete(routeRules).where(eq(routeRules.id, ban));
    await within(1000, async () => (await get(edge.port, host, "/x")).headers["x-workspace-edge"] === "denied");
    // Allow this client: now the rate limit decides (it counted nothing while the others refused).
    await database.db
      .update(routeRules)
      .set({ config: { mode: "allow", cidrs: ["127.0.0.0/8"] } })
      .where(eq(routeRules.id, allow));
    await within(1000, async () => (await get(edge.port, host, "/x")).status === 200);
    const over = await get(edge.port, host, "/x");
    expect(over.status).toBe(429);
    expect(over.headers["x-workspace-edge"]).toBe("rate_limited");

    // A deny plus a rate limit on one path: the deny wins every time, and nothing is counted.
    const t = await seedProject(database.db);
    await deploy(database.db, t, t.productionId, app.port);
    const other = `${t.slug}.${SHARED}`;
    // The deny first: a request made before the edge has both rules must not be counted by the limit alone.
    const deny = await addRule(database.db, t, "allow-deny", { mode: "deny", cidrs: ["127.0.0.0/8"] }, "/y");
    await within(1000, async () => (await get(edge.port, other, "/y")).headers["x-workspace-edge"] === "denied");
    const tLimit = await addRule(database.db, t, "rate-limit", { limit: 1, windowSeconds: 60, by: "ip" }, "/y");
    await within(1000, async () => edge.table.lookup(other)?.rules.some((r) => r.id === tLimit) === true);
    for (let i = 0; i < 3; i++) expect((await get(edge.port, other, "/y")).headers["x-workspace-edge"]).toBe("denied");
    expect(
      await database.db
        .select()
        .from(rateLimits)
        .where(eq(rateLimits.key, `edge:${tLimit}:127.0.0.1`)),
    ).toHaveLength(0);
    await database.db.delete(routeRules).where(eq(routeRules.id, deny));
    await within(1000, async () => (await get(edge.port, other, "/y")).status === 200);
    expect((await get(edge.port, other, "/y")).status).toBe(429);
    expect(limit).toMatch(/^rr_/);
  });

  it("bans and allows IPv6 clients: a client on ::1 and clients through a trusted proxy", async () => {
    await start(["127.0.0.1/32"]);
    const v6 = await startEdge(database.db, async () => ({ stop: async () => {} }), { host: "::1" });
    current = undefined;
    const s = await seedProject(database.db);
    const app = await startApp("v6");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await addRule(database.db, s, "ban", { cidr: "::1/128", expiresAt: null, reason: null }, "/v6");
    await addRule(database.db, s, "ban", { cidr: "2001:db8:bad::/48", expiresAt: null, reason: null }, "/v6");
    await addRule(database.db, s, "allow-deny", { mode: "allow", cidrs: ["2001:db8:1::/64"] }, "/only");
    // Both tables see the rows (the ::1 edge has no feed: it reloads by hand).
    await v6.table.reload(s.projectId);
    await edge.table.reload(s.projectId);
    expect((await get(v6.port, host, "/v6", {}, "::1")).headers["x-workspace-edge"]).toBe("banned");
    expect((await get(v6.port, host, "/open", {}, "::1")).status).toBe(200);
    expect((await get(edge.port, host, "/v6")).status).toBe(200);
    const via = (xff: string, path: string) => get(edge.port, host, path, { "x-forwarded-for": xff });
    expect((await via("2001:db8:bad:1::5", "/v6")).headers["x-workspace-edge"]).toBe("banned");
    expect((await via("2001:db8:bad0::5", "/v6")).status).toBe(200);
    expect((await via("2001:db8:1::77", "/only")).status).toBe(200);
    expect((await via("2001:db8:2::77", "/only")).headers["x-workspace-edge"]).toBe("denied");
    expect((await via("198.51.100.7", "/only")).headers["x-workspace-edge"]).toBe("denied");
  });

  it("without TRUSTED_PROXIES a banned client's X-Forwarded-For is ignored: it stays banned", async () => {
    await start();
    const s = await seedProject(database.db);
    const app = await startApp("untrusted");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await addRule(database.db, s, "ban", { cidr: "127.0.0.1", expiresAt: null, reason: "test" });
    await within(1000, async () => (await get(edge.port, host)).status === 403);
    for (const xff of ["198.51.100.1", "198.51.100.1, 203.0.113.9", "::ffff:198.51.100.1"]) {
      const res = await get(edge.port, host, "/", { "x-forwarded-for": xff });
      expect(res.status, xff).toBe(403);
      expect(res.headers["x-workspace-edge"]).toBe("banned");
    }
  });

  it("rate-limits an IPv6 client by its /64, and prunes ended windows", async () => {
    await start(["127.0.0.1/32"], { pruneEveryMs: 100 });
    const s = await seedProject(database.db);
    const app = await startApp("v6-limit");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    const id = await addRule(database.db, s, "rate-limit", { limit: 2, windowSeconds: 60, by: "ip" }, "/l");
    await within(1000, async () => (edge.table.lookup(host)?.rules.length ?? 0) === 1);
    const via = (xff: string) => get(edge.port, host, "/l", { "x-forwarded-for": xff });
    // Three addresses of one /64 share its count.
    expect((await via("2001:db8:0:1::1")).status).toBe(200);
    expect((await via("2001:db8:0:1:aaaa::2")).status).toBe(200);
    expect((await via("2001:db8:0:1:ffff:ffff:ffff:ffff")).status).toBe(429);
    // Another /64 has its own; IPv4 clients count by address.
    expect((await via("2001:db8:0:2::1")).status).toBe(200);
    expect((await via("198.51.100.1")).status).toBe(200);
    expect((await via("198.51.100.2")).status).toBe(200);
    const keys = (await database.db.select().from(rateLimits)).map((r) => r.key).filter((k) => k.startsWith(`edge:${id}:`));
    expect(keys.sort()).toEqual([`edge:${id}:198.51.100.1`, `edge:${id}:198.51.100.2`, `edge:${id}:2001:db8:0:1::/64`, `edge:${id}:2001:db8:0:2::/64`]);
    // An ended window is deleted by the edge's prune.
    const ended = `edge:${id}:203.0.113.250`;
    await database.db.insert(rateLimits).values({ key: ended, windowEnd: new Date(Date.now() - 1000), count: 1, granted: 1 } as never);
    const others = `test:not-the-edge:${id}`;
    await database.db.insert(rateLimits).values({ key: others, windowEnd: new Date(Date.now() - 1000), count: 1, granted: 1 } as never);
    await within(2000, async () => (await database.db.select().from(rateLimits).where(eq(rateLimits.key, ended))).length === 0);
    // Only the edge's own keys: other ended windows are their owners' to prune.
    expect(await database.db.select().from(rateLimits).where(eq(rateLimits.key, others))).toHaveLength(1);
    expect(
      await database.db
        .select()
        .from(rateLimits)
        .where(eq(rateLimits.key, `edge:${id}:198.51.100.1`)),
    ).toHaveLength(1);
  });

  it("the listener has no whole-request timeout (slow uploads pass) and close() cuts an open WebSocket after the grace period", async () => {
    await start([], { closeGraceMs: 300 });
    expect(edge.http.server.requestTimeout).toBe(0);
    expect(edge.http.server.headersTimeout).toBeGreaterThan(0);
    const s = await seedProject(database.db);
    const app = await startApp("ws-close");
    await deploy(database.db, s, s.productionId, app.port);
    const host = `${s.slug}.${SHARED}`;
    await within(1000, async () => (await get(edge.port, host)).status === 200);
    const socket = connect(edge.port, "127.0.0.1");
    const received: Buffer[] = [];
    socket.on("data", (d) => received.push(d));
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.write(
      `GET /socket HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    await within(2000, async () => Buffer.concat(received).toString().startsWith("HTTP/1.1 101"));
    const started = performance.now();
    const done = await Promise.race([edge.http.close().then(() => "closed"), new Promise((r) => setTimeout(() => r("hung"), 3000))]);
    expect(done).toBe("closed");
    expect(performance.now() - started).toBeLessThan(2000);
    await closed;
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
