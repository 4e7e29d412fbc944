/**
 * The client address through the real edge: behind a trusted proxy, a ban on
 * 6.6.6.6 applies whatever form the proxy wrote the client in (with a port,
 * IPv4-mapped in brackets), the request line logs that client, and a hop the
 * edge cannot read is an unknown client, not the proxy.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer } from "../../functions/self-hosted/http-server";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { deployments, environments, organizations, projects, routeRules } from "../../shared/db/schema";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { parseCidr } from "../../shared/net/cidr";
import { rawGet } from "../support/raw-http";
import { storedRequestLines } from "../support/request-lines";

const SHARED = "apps.test";

const get = (port: number, host: string, path: string, headers: Record<string, string>) => rawGet(port, host, path, { headers, agent: false });

describe("edge client address behind a trusted proxy (PGlite)", () => {
  let database: PgliteDatabase;
  let port: number;
  let host: string;
  let projectId: string;
  let flush: () => Promise<void>;
  // One edge for the file: stopped after all its tests, last started first.
  const stops: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    database = await openPglite({});
    const db = database.db;
    const app = createServer((_req, res) => res.end("app"));
    await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
    stops.push(() => new Promise<void>((r) => app.close(() => r())));

    const orgId = newId("org");
    projectId = newId("prj");
    const slug = `edge-${projectId.slice(-10)}`;
    host = `${slug}.${SHARED}`;
    const environmentId = newId("env");
    await db.insert(organizations).values({ id: orgId, name: "Edge client address" });
    await db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
    await db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
    await db.insert(deployments).values({
      id: newId("dpl"),
      orgId,
      projectId,
      environmentId,
      status: "ready",
      current: true,
      port: (app.address() as AddressInfo).port,
      servedBy: "test",
      source: "git",
    });
    await db.insert(routeRules).values({
      id: newId("rr"),
      orgId,
      projectId,
      kind: "ban",
      path: "/ban",
      config: { cidr: "6.6.6.6/32", expiresAt: null, reason: null } as never,
    });

    const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
    const logs = createRequestLogWriter({ db, logger: silentLogger });
    flush = () => logs.flush();
    const edge = createEdge({
      db,
      table,
      logs,
      logger: silentLogger,
      trustedProxies: [parseCidr("127.0.0.1/32")!],
      holdMs: 1500,
      touchEveryMs: 1000,
      apiHosts: [...LOOPBACK_HOSTS],
    });
    const http = await bindHttpServer({ port: 0, host: "127.0.0.1" });
    http.serve(() => new Response("the api"), edge);
    port = http.port;
    stops.push(async () => {
      edge.stop();
      await http.close();
      table.stop();
      await logs.flush();
    });
    await table.settled();
  });
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop();
    await database.close();
  });

  it("a ban on 6.6.6.6 applies to X-Forwarded-For 6.6.6.6:1234 and [::ffff:6.6.6.6]:80, and the log names 6.6.6.6", async () => {
    for (const xff of ["6.6.6.6:1234", "[::ffff:6.6.6.6]:80", "6.6.6.6", "1.2.3.4, 6.6.6.6:1234, 127.0.0.1"]) {
      const res = await get(port, host, "/ban", { "x-forwarded-for": xff });
      expect(res.status, xff).toBe(403);
      expect(res.headers["x-workspace-edge"], xff).toBe("banned");
    }
    expect((await get(port, host, "/ban", { "x-forwarded-for": "7.7.7.7:1234" })).status).toBe(200);
    await flush();
    const lines = await storedRequestLines(database.db, projectId);
    const clients = lines.map((l) => l.clientAddress);
    expect(clients).toEqual(["6.6.6.6", "6.6.6.6", "6.6.6.6", "6.6.6.6", "7.7.7.7"]);
  });

  it("without X-Forwarded-For, a trusted proxy's Forwarded header names the client: for= with a port, bracketed IPv6, IPv4-mapped", async () => {
    for (const forwarded of ['for="6.6.6.6:1234";proto=https', 'for="[::ffff:6.6.6.6]:80"', "for=1.2.3.4, for=6.6.6.6;by=127.0.0.1", "For=6.6.6.6"]) {
      const res = await get(port, host, "/ban", { forwarded });
      expect(res.status, forwarded).toBe(403);
      expect(res.headers["x-workspace-edge"], forwarded).toBe("banned");
    }
    expect((await get(port, host, "/ban", { forwarded: "for=7.7.7.7" })).status).toBe(200);
    // Both present: X-Forwarded-For decides (a proxy writes one of them).
    expect((await get(port, host, "/ban", { forwarded: "for=6.6.6.6", "x-forwarded-for": "7.7.7.7" })).status).toBe(200);
  });

  it("a hop that does not parse is an unknown client: logged as unknown, not as the proxy", async () => {
    const res = await get(port, host, "/other", { "x-forwarded-for": "6.6.6.6, _hidden" });
    expect(res.status).toBe(200);
    await flush();
    const lines = await storedRequestLines(database.db, projectId);
    const last = lines.filter((l) => l.path === "/other");
    expect(last.map((l) => l.clientAddress)).toEqual(["unknown"]);
  });
});
