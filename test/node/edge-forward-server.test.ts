/**
 * A self-hosted instance's edge forwarding to a build server's edge on loopback
 * (issue 22, item 5): a current deployment placed on a server (its serving state set
 * through the runner's store function, as a remote runner's report would) is reached
 * through the instance's edge with the original Host and client address, signed; the
 * instance applies the route rules and writes the request log; a WebSocket passes
 * both edges; a server without an edge key is answered with its page; a sleeping app
 * is woken and its request held until the server reports it listening.
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable, EDGE_CHANNEL, type RouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer } from "../../functions/self-hosted/http-server";
import { setServing } from "../../functions/self-hosted/runner/store";
import { createServer as registerServer, updateServer } from "../../functions/servers/store";
import { createKeyring, type Keyring } from "../../shared/crypto/keyring";
import { listenPgliteChannel, type Stoppable } from "../../shared/db/listen";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { deployments, environments, organizations, projects, routeRules, servers, users } from "../../shared/db/schema";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { useCleanups } from "../support/cleanups";
import { rawGet } from "../support/raw-http";
import { type SeenRequest, startServerEdgeFixture } from "../support/server-edge-fixture";
import { TEST_SECRET_KEYS } from "../support/test-keys";
import { storedRequestLines } from "../support/request-lines";

const SHARED = "apps.test";
const { cleanups } = useCleanups("edge-forward-");

const get = (port: number, host: string, path: string, headers: Record<string, string> = {}) => rawGet(port, host, path, { headers });

async function within(ms: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`not within ${ms} ms`);
}

describe("self-hosted edge forwarding to a build server (PGlite)", () => {
  let database: PgliteDatabase;
  let keyring: Keyring;
  let current: RouteTable | undefined;
  let feed: Stoppable;
  beforeAll(async () => {
    database = await openPglite({});
    keyring = await createKeyring(TEST_SECRET_KEYS);
    feed = await listenPgliteChannel(database.client, EDGE_CHANNEL, { onMessage: (id) => current?.changed(id) });
  });
  afterAll(async () => {
    await feed.stop();
    await database.close();
  });

  /** The instance's edge, a registered server whose edge runs on loopback, and a project whose current deployment that server serves. */
  async function setup(opts: { asleep?: boolean } = {}) {
    const db = database.db;
    const orgId = newId("org");
    const userId = newId("usr");
    await db.insert(organizations).values({ id: orgId, name: "Forwarding test" });
    await db.insert(users).values({ id: userId, email: `${userId}@example.test`, name: "Admin" });
    const { row: server, token } = await registerServer(db, keyring, { orgId, userId, name: "box" }, new Date());
    const deploymentId = newId("dpl");
    const fixture = await startServerEdgeFixture(token, [deploymentId]);
    cleanups.push(() => fixture.close());
    await updateServer(db, orgId, server.id, { publicUrl: fixture.url }, new Date());

    const projectId = newId("prj");
    const slug = `fw-${projectId.slice(-10)}`;
    const environmentId = newId("env");
    await db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
    await db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
    await db.insert(deployments).values({
      id: deploymentId,
      orgId,
      projectId,
      environmentId,
      status: "ready",
      current: true,
      source: "git",
      placement: "server",
      serverId: server.id,
      asleepAt: opts.asleep ? new Date() : null,
    });
    // What the server's runner reports through the protocol (PUT …/serving): the app listens on this port of it.
    if (!opts.asleep) await setServing(db, deploymentId, server.id, fixture.appPort, new Date());

    const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
    current = table;
    const logs = createRequestLogWriter({ db, logger: silentLogger });
    const edge = createEdge({
      db,
      table,
      logs,
      logger: silentLogger,
      trustedProxies: [],
      holdMs: 3000,
      touchEveryMs: 1000,
      apiHosts: [...LOOPBACK_HOSTS],
      keyring,
      // The server's edge listens on loopback (OUTBOUND_ALLOW_PRIVATE, as the harnesses set it).
      outboundAllowPrivate: true,
    });
    const http = await bindHttpServer({ port: 0, host: "127.0.0.1" });
    http.serve(() => new Response("the api"), edge);
    cleanups.push(async () => {
      edge.stop();
      await http.close();
      table.stop();
      await logs.flush();
    });
    return { port: http.port, host: `${slug}.${SHARED}`, orgId, projectId, deploymentId, server, fixture, logs };
  }

  it("forwards to the server's edge with the original Host and client address; rules and the log apply here; a client's signed headers are dropped", async () => {
    const s = await setup();
    await database.db.insert(routeRules).values({
      id: newId("rr"),
      orgId: s.orgId,
      projectId: s.projectId,
      kind: "allow-deny",
      path: "/admin",
      config: { mode: "deny", cidrs: ["127.0.0.0/8"] } as never,
    });
    await current!.reload(s.projectId);

    const ok = await get(s.port, s.host, "/hello/../shop?q=1", { "x-wsp-signature": "forged", "x-wsp-forwarded-host": "evil.test" });
    expect(ok.status).toBe(200);
    const seen = JSON.parse(ok.body) as SeenRequest;
    expect(seen).toMatchObject({ method: "GET", url: "/shop?q=1", host: s.host, forwardedFor: "127.0.0.1" });
    expect(seen.wspHeaders).toEqual([]);

    const denied = await get(s.port, s.host, "/admin");
    expect(denied.status).toBe(403);
    expect(denied.headers["x-workspace-edge"]).toBe("denied");

    await s.logs.flush();
    const lines = await storedRequestLines(database.db, s.projectId);
    expect(lines.map((l) => l.status).sort()).toEqual([200, 403]);
    expect(lines.every((l) => l.deploymentId === s.deploymentId)).toBe(true);
  });

  it("a WebSocket passes through both edges", async () => {
    const s = await setup();
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/ws`, { headers: { host: s.host } });
    cleanups.push(() => ws.terminate());
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    ws.send("hi");
    expect(await new Promise<string>((r) => ws.once("message", (d) => r(d.toString())))).toBe("echo:hi");
  });

  it("a server registered without an edge key, or without a public URL, is answered with the reason", async () => {
    const s = await setup();
    await database.db.update(servers).set({ edgeKeyCiphertext: null }).where(eq(servers.id, s.server.id));
    // The forwarding target is cached for a few seconds per server: wait it out.
    await within(8000, async () => (await get(s.port, s.host, "/")).status === 503);
    const unkeyed = await get(s.port, s.host, "/");
    expect(unkeyed.headers["x-workspace-edge"]).toBe("server_unkeyed");
    expect(unkeyed.body).toContain("register it again");
  });

  it("a sleeping app is woken and its request held until the server reports it listening", async () => {
    const s = await setup({ asleep: true });
    const pending = get(s.port, s.host, "/wake");
    await within(2000, async () => {
      const [row] = await database.db.select({ asleepAt: deployments.asleepAt }).from(deployments).where(eq(deployments.id, s.deploymentId));
      return row?.asleepAt === null;
    });
    // The server's runner started it and reported its port.
    await setServing(database.db, s.deploymentId, s.server.id, s.fixture.appPort, new Date());
    const answer = await pending;
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as SeenRequest).url).toBe("/wake");
  });
});
