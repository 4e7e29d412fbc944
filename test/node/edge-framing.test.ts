/**
 * Request smuggling through the edge, over real sockets: raw bytes to the real
 * listener (bindHttpServer + createEdge on PGlite) in front of a loopback app
 * that records every request it parses. Each ambiguous framing is 400 with the
 * connection closed and never a second request at the app; a body the edge
 * accepts reaches the app framed; an unfinished smuggled request cannot capture
 * the next client's request; pooled upstream connections are reused for
 * well-framed exchanges only.
 */
import { createServer, type IncomingMessage } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer } from "../../functions/self-hosted/http-server";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { deployments, environments, organizations, projects } from "../../shared/db/schema";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";

const SHARED = "apps.test";

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
  /** The edge's upstream connection it came on. */
  peerPort: number;
}

/** A loopback app recording each request it parsed; `/early` answers without reading the body. */
async function startApp() {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const record = (body: string) => seen.push({ method: req.method!, url: req.url!, headers: req.headers, body, peerPort: req.socket.remotePort! });
    if (req.url === "/early") {
      record("");
      res.end("early");
      return;
    }
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      record(body);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ url: req.url, body, authorization: req.headers.authorization ?? null }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** Writes `bytes`, reads until the edge closes the connection or `idleMs` pass without data; the statuses and the text. */
function exchange(port: number, bytes: string, idleMs = 600) {
  return new Promise<{ statuses: number[]; text: string; closed: boolean }>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    let closed = false;
    const finish = () => {
      socket.destroy();
      resolve({ statuses: [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])), text, closed });
    };
    let timer = setTimeout(finish, idleMs);
    socket.setEncoding("utf8");
    socket.on("data", (d) => {
      text += d;
      clearTimeout(timer);
      timer = setTimeout(finish, idleMs);
    });
    socket.on("end", () => {
      closed = true;
      clearTimeout(timer);
      finish();
    });
    socket.on("error", () => {
      closed = true;
      clearTimeout(timer);
      finish();
    });
    socket.write(bytes);
  });
}

const SMUGGLED = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
const chunked = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`;

describe("edge framing", () => {
  let database: PgliteDatabase;
  let edgePort: number;
  let app: Awaited<ReturnType<typeof startApp>>;
  let host: string;

  beforeAll(async () => {
    database = await openPglite({});
    const db = database.db;
    const orgId = newId("org");
    const projectId = newId("prj");
    const slug = `framing-${projectId.slice(-8)}`;
    host = `${slug}.${SHARED}`;
    const environmentId = newId("env");
    app = await startApp();
    await db.insert(organizations).values({ id: orgId, name: "Framing" });
    await db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
    await db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
    await db
      .insert(deployments)
      .values({ id: newId("dpl"), orgId, projectId, environmentId, status: "ready", current: true, port: app.port, servedBy: "test", source: "git" });
    const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
    const logs = createRequestLogWriter({ db, logger: silentLogger });
    const edge = createEdge({ db, table, logs, logger: silentLogger, trustedProxies: [], holdMs: 1000, touchEveryMs: 1000, apiHosts: [...LOOPBACK_HOSTS] });
    const http = await bindHttpServer({ port: 0, host: "127.0.0.1", closeGraceMs: 100 });
    http.serve(() => new Response("the api"), edge);
    edgePort = http.port;
    afterAll(async () => {
      edge.stop();
      await http.close();
      table.stop();
      await logs.flush();
      await app.close();
      await database.close();
    });
  });

  const smuggledSeen = () => app.seen.some((s) => s.url === "/smuggled");

  it.each([
    ["GET with Transfer-Encoding: chunked", `GET / HTTP/1.1\r\nHost: HOST\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`],
    ["HEAD with Transfer-Encoding: chunked", `HEAD / HTTP/1.1\r\nHost: HOST\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`],
    ["GET with a Content-Length body", `GET / HTTP/1.1\r\nHost: HOST\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`],
    [
      "Content-Length named by Connection",
      `POST / HTTP/1.1\r\nHost: HOST\r\nConnection: keep-alive, content-length\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`,
    ],
    [
      "Transfer-Encoding named by Connection",
      `DELETE / HTTP/1.1\r\nHost: HOST\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`,
    ],
    ["Host named by Connection", "GET / HTTP/1.1\r\nHost: HOST\r\nConnection: host\r\n\r\n"],
    ["Transfer-Encoding and Content-Length", `POST / HTTP/1.1\r\nHost: HOST\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`],
    ["Transfer-Encoding: gzip, chunked", `POST / HTTP/1.1\r\nHost: HOST\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${chunked(SMUGGLED)}`],
    ["two Transfer-Encoding lines", `POST / HTTP/1.1\r\nHost: HOST\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`],
    ["two Host headers", "GET / HTTP/1.1\r\nHost: HOST\r\nHost: other.example\r\n\r\n"],
    ["absolute-form with another Host", "GET http://other.example/ HTTP/1.1\r\nHost: HOST\r\n\r\n"],
    ["absolute-form naming the app under another Host", "GET http://HOST/ HTTP/1.1\r\nHost: other.example\r\n\r\n"],
    // The classic forms Node's parser refuses: they must stay refused.
    ["CL.TE", `POST / HTTP/1.1\r\nHost: HOST\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG${SMUGGLED}`],
    ["duplicate Content-Length", `POST / HTTP/1.1\r\nHost: HOST\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabc${SMUGGLED}`],
    ["obs-fold Transfer-Encoding", `POST / HTTP/1.1\r\nHost: HOST\r\nTransfer-Encoding:\r\n chunked\r\n\r\n${chunked(SMUGGLED)}`],
    ["bare LF", `POST / HTTP/1.1\nHost: HOST\nTransfer-Encoding: chunked\n\n${chunked(SMUGGLED)}`],
  ])("%s: 400, the connection closed, nothing smuggled", async (_name, template) => {
    const before = app.seen.length;
    const answer = await exchange(edgePort, template.replaceAll("HOST", host));
    expect(answer.statuses).toEqual([400]);
    expect(answer.closed).toBe(true);
    expect(smuggledSeen()).toBe(false);
    expect(app.seen.length).toBe(before);
  });

  it("DELETE and OPTIONS with a chunked body are forwarded chunked: the app reads one request whose body is the text", async () => {
    for (const method of ["DELETE", "OPTIONS"]) {
      const before = app.seen.length;
      const answer = await exchange(edgePort, `${method} /with-body HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`);
      expect(answer.statuses).toEqual([200]);
      expect(app.seen.slice(before)).toMatchObject([{ method, url: "/with-body", body: SMUGGLED, headers: { "transfer-encoding": "chunked" } }]);
    }
    expect(smuggledSeen()).toBe(false);
  });

  it("an unfinished smuggled request cannot capture the next client's request, its Authorization header included", async () => {
    const partial = "GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Capture: ";
    const methods = ["GET", "DELETE", "OPTIONS"];
    for (const method of methods) {
      // The attacker's connection, then a victim on another connection while the attacker's lingers.
      const attack = exchange(edgePort, `${method} / HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(partial)}`, 1500);
      await new Promise((r) => setTimeout(r, 100));
      const victim = await exchange(edgePort, `GET /victim HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer victim-secret\r\nConnection: close\r\n\r\n`);
      expect(victim.statuses).toEqual([200]);
      const body = JSON.parse(victim.text.slice(victim.text.indexOf("\r\n\r\n") + 4));
      expect(body).toMatchObject({ url: "/victim", authorization: "Bearer victim-secret" });
      await attack;
    }
    expect(smuggledSeen()).toBe(false);
    for (const s of app.seen) if (s.headers.authorization) expect(s.url).toBe("/victim");
    expect(app.seen.some((s) => JSON.stringify(s).includes("X-Capture") && s.url !== "/")).toBe(false);
  });

  it("a chunked POST and a Content-Length POST reach the app intact, on one kept-alive client connection and a reused upstream connection", async () => {
    const before = app.seen.length;
    const text = "hello, framed world";
    const answer = await exchange(
      edgePort,
      `POST /a HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(text)}` +
        `POST /b HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${text.length}\r\n\r\n${text}` +
        `GET /c HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    );
    expect(answer.statuses).toEqual([200, 200, 200]);
    expect(answer.closed).toBe(false);
    const seen = app.seen.slice(before);
    expect(seen).toMatchObject([
      { method: "POST", url: "/a", body: text, headers: { "transfer-encoding": "chunked" } },
      { method: "POST", url: "/b", body: text, headers: { "content-length": String(text.length) } },
      { method: "GET", url: "/c", body: "" },
    ]);
    expect(seen[0]!.headers["content-length"]).toBeUndefined();
    expect(seen[1]!.headers["transfer-encoding"]).toBeUndefined();
    // One exchange after the other (pipelined ones may overlap the pool's release): one upstream connection serves them all.
    const later = app.seen.length;
    await exchange(edgePort, `POST /d HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(text)}`, 100);
    await exchange(edgePort, `POST /e HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${text.length}\r\n\r\n${text}`, 100);
    await exchange(edgePort, `GET /f HTTP/1.1\r\nHost: ${host}\r\n\r\n`, 100);
    const sequential = app.seen.slice(later);
    expect(sequential.map((s) => s.url)).toEqual(["/d", "/e", "/f"]);
    expect(new Set(sequential.map((s) => s.peerPort)).size).toBe(1);
  });

  it("an app that answers before it has the whole body loses its upstream connection; the client's connection stays framed", async () => {
    const before = app.seen.length;
    const big = "x".repeat(256 * 1024);
    const answer = await exchange(
      edgePort,
      `POST /early HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${big.length}\r\n\r\n${big}` + `GET /after HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    );
    expect(answer.statuses).toEqual([200, 200]);
    const seen = app.seen.slice(before);
    expect(seen.map((s) => s.url)).toEqual(["/early", "/after"]);
    expect(seen[1]!.peerPort).not.toBe(seen[0]!.peerPort);
  });
});
