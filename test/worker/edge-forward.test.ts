import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { setServing } from "../../functions/self-hosted/runner/store";
import { createServer as registerServer, updateServer } from "../../functions/servers/store";
import { deployments, environments, organizations, projects, routeRules, users } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import type { SeenRequest } from "../support/server-edge-fixture";
import { openWorkerHarness, type WorkerHarness } from "../support/worker-harness";
import { storedRequestLines } from "../support/request-lines";

const SHARED = "apps.example.com";

describe("Worker edge forwarding to a build server", () => {
  let h: WorkerHarness;
  beforeAll(async () => {
    h = await openWorkerHarness();
  });
  afterAll(async () => h?.close());

  async function seed() {
    const orgId = newId("org");
    const userId = newId("usr");
    await h.db.insert(organizations).values({ id: orgId, name: "Worker forwarding" });
    await h.db.insert(users).values({ id: userId, email: `${userId}@example.test`, name: "Admin" });
    const { row: server, token } = await registerServer(h.db, h.keyring, { orgId, userId, name: "box" }, new Date());
    const deploymentId = newId("dpl");
    const started = await fetch(`${inject("serverEdgeControlUrl")}/start`, { method: "POST", body: JSON.stringify({ token, deploymentIds: [deploymentId] }) });
    if (!started.ok) throw new Error(`the server edge did not start: ${await started.text()}`);
    const edge = (await started.json()) as { url: string; appPort: number };
    await updateServer(h.db, orgId, server.id, { publicUrl: edge.url }, new Date());
    const projectId = newId("prj");
    const slug = `wf-${projectId.slice(-10).toLowerCase()}`;
    const environmentId = newId("env");
    await h.db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
    await h.db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
    await h.db
      .insert(deployments)
      .values({ id: deploymentId, orgId, projectId, environmentId, status: "ready", current: true, source: "git", placement: "server", serverId: server.id });
    // What the server's runner reports through the protocol (PUT …/serving).
    await setServing(h.db, deploymentId, server.id, edge.appPort, new Date());
    return { orgId, projectId, deploymentId, host: `${slug}.${SHARED}`, edge };
  }

  it("forwards a free route's request, signed, with the original Host and client address; rules and the log apply in the Worker", async () => {
    const s = await seed();
    await h.db.insert(routeRules).values({
      id: newId("rr"),
      orgId: s.orgId,
      projectId: s.projectId,
      kind: "allow-deny",
      path: "/admin",
      config: { mode: "deny", cidrs: ["203.0.113.0/24"] } as never,
    });
    const client = { host: s.host, "cf-connecting-ip": "203.0.113.5", "x-wsp-signature": "forged" };

    const ok = await h.request("/shop?q=1", { method: "POST", body: "order", headers: { ...client, "content-type": "text/plain" } });
    expect(ok.status).toBe(200);
    const seen = (await ok.json()) as SeenRequest;
    expect(seen).toMatchObject({ method: "POST", url: "/shop?q=1", host: s.host, forwardedFor: "203.0.113.5", forwardedProto: "http", body: "order" });
    expect(seen.wspHeaders).toEqual([]);

    const denied = await h.request("/admin", { headers: client });
    expect(denied.status).toBe(403);
    expect(denied.headers.get("x-workspace-edge")).toBe("denied");

    const lines = await storedRequestLines(h.db, s.projectId);
    expect(lines.map((l) => l.status).sort()).toEqual([200, 403]);
    const forwarded = lines.find((l) => l.status === 200)!;
    expect(forwarded).toMatchObject({ clientAddress: "203.0.113.5", path: "/shop", bytes: expect.any(Number) });
    expect(forwarded.bytes).toBeGreaterThan(0);
    expect(forwarded.deploymentId).toBe(s.deploymentId);
  });

  it("the server's edge refuses a request that did not come through the Worker; an unknown name gets the edge's 404", async () => {
    const s = await seed();
    const direct = await fetch(`${s.edge.url}/shop`, { headers: { "x-wsp-forwarded-host": s.host } });
    expect(direct.status).toBe(403);
    expect(direct.headers.get("x-workspace-edge")).toBe("not_forwarded");
    const unknown = await h.request("/", { headers: { host: `nothing-here-${Date.now()}.${SHARED}` } });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get("x-workspace-edge")).toBe("unknown_host");
    const api = await h.request("/api/healthz");
    expect(api.headers.get("x-workspace-edge")).toBeNull();
  });
});
