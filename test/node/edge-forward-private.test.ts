/**
 * The self-hosted edge forwards to a server's publicUrl only through the outbound
 * guard (functions/servers/forward-lookup-node.ts): with OUTBOUND_ALLOW_PRIVATE unset, a
 * public-looking name that resolves to a loopback address when the request comes (DNS
 * rebinding: the name was accepted when it was set) is refused with 502 `server_refused`
 * and a plain reason, and nothing reaches the address; a literal private address stored
 * before the check existed is refused the same way. With OUTBOUND_ALLOW_PRIVATE the same
 * name is forwarded to the address checked (the connection uses the guard's resolution).
 */
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer } from "../../functions/self-hosted/http-server";
import { setServing } from "../../functions/self-hosted/runner/store";
import { createServer as registerServer } from "../../functions/servers/store";
import { createKeyring, type Keyring } from "../../shared/crypto/keyring";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { deployments, environments, organizations, projects, servers, users } from "../../shared/db/schema";
import { jsonLogger, silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { useCleanups } from "../support/cleanups";
import { rawGet } from "../support/raw-http";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const SHARED = "apps.test";
const { cleanups } = useCleanups("edge-forward-private-");

const get = (port: number, host: string, path: string) => rawGet(port, host, path);

describe("self-hosted edge: forwarding to a private publicUrl (PGlite)", () => {
  let database: PgliteDatabase;
  let keyring: Keyring;
  // What a server's edge on loopback would receive: counted, never expected when refused.
  let hits = 0;
  let targetPort = 0;
  let closeTarget: () => Promise<void>;
  beforeAll(async () => {
    database = await openPglite({});
    keyring = await createKeyring(TEST_SECRET_KEYS);
    const target = createHttpServer((_req, res) => {
      hits++;
      res.end("internal secret");
    });
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
    targetPort = (target.address() as AddressInfo).port;
    closeTarget = () => new Promise<void>((r) => target.close(() => r()));
  });
  afterAll(async () => {
    await closeTarget();
    await database.close();
  });

  async function setup(publicUrl: string, outboundAllowPrivate: boolean) {
    const db = database.db;
    const orgId = newId("org");
    const userId = newId("usr");
    await db.insert(organizations).values({ id: orgId, name: "Guard test" });
    await db.insert(users).values({ id: userId, email: `${userId}@example.test`, name: "Admin" });
    const { row: server } = await registerServer(db, keyring, { orgId, userId, name: "box" }, new Date());
    // Written as a row stored before the check, or a name accepted at registration.
    await db.update(servers).set({ publicUrl }).where(eq(servers.id, server.id));
    const projectId = newId("prj");
    const slug = `pg-${projectId.slice(-10)}`;
    const environmentId = newId("env");
    const deploymentId = newId("dpl");
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
    });
    await setServing(db, deploymentId, server.id, 4000, new Date());
    const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
    const logs = createRequestLogWriter({ db, logger: silentLogger });
    const logLines: string[] = [];
    const edge = createEdge({
      db,
      table,
      logs,
      logger: jsonLogger((line) => logLines.push(line)),
      trustedProxies: [],
      holdMs: 1000,
      touchEveryMs: 1000,
      apiHosts: [...LOOPBACK_HOSTS],
      keyring,
      outboundAllowPrivate,
      // The attacker's DNS: a public-looking name answering a loopback address at forwarding time.
      resolve: async (hostname) => {
        if (hostname === "rebind.example.com") return [{ address: "127.0.0.1", family: 4 }];
        throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
      },
    });
    const http = await bindHttpServer({ port: 0, host: "127.0.0.1" });
    http.serve(() => new Response("the api"), edge);
    cleanups.push(async () => {
      edge.stop();
      await http.close();
      table.stop();
      await logs.flush();
    });
    return { port: http.port, host: `${slug}.${SHARED}`, logLines };
  }

  it("a name resolving to loopback at forwarding time is refused: 502 with the reason, nothing sent", async () => {
    const s = await setup(`http://rebind.example.com:${targetPort}`, false);
    const before = hits;
    const answer = await get(s.port, s.host, "/");
    expect(answer.status).toBe(502);
    expect(answer.headers["x-workspace-edge"]).toBe("server_refused");
    expect(answer.body).toContain("private or internal address");
    expect(answer.body).not.toContain("internal secret");
    expect(hits).toBe(before);
    expect(s.logLines.join("\n")).toMatch(/edge_forward_refused.*loopback address/);
  });

  it("a literal private or metadata address is refused the same way", async () => {
    for (const url of [`http://127.0.0.1:${targetPort}`, "http://169.254.169.254", `http://[::1]:${targetPort}`]) {
      const s = await setup(url, false);
      const before = hits;
      const answer = await get(s.port, s.host, "/");
      expect(answer.status).toBe(502);
      expect(answer.headers["x-workspace-edge"]).toBe("server_refused");
      expect(hits).toBe(before);
    }
  });

  it("with OUTBOUND_ALLOW_PRIVATE the name is forwarded to the address the guard resolved; metadata stays refused", async () => {
    const s = await setup(`http://rebind.example.com:${targetPort}`, true);
    const before = hits;
    const answer = await get(s.port, s.host, "/");
    expect(answer.status).toBe(200);
    expect(hits).toBe(before + 1);
    const metadata = await setup("http://169.254.169.254", true);
    expect((await get(metadata.port, metadata.host, "/")).headers["x-workspace-edge"]).toBe("server_refused");
  });
});
