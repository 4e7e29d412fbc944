/**
 * The Worker's edge forwards to a server's publicUrl only through the outbound guard
 * (functions/servers/public-url-guard.ts): with OUTBOUND_ALLOW_PRIVATE unset, a stored
 * publicUrl whose host is a loopback, private or metadata literal (written before the
 * check existed, or under another setting) is answered 502 `server_refused` by the
 * Worker itself: the app's answer never comes back. A name is left to Cloudflare's
 * network, which routes no private address (a Worker cannot resolve names).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { setServing } from "../../functions/self-hosted/runner/store";
import { createServer as registerServer, updateServer } from "../../functions/servers/store";
import { deployments, environments, organizations, projects, users } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { openWorkerHarness, type WorkerHarness } from "../support/worker-harness";

const SHARED = "apps.example.com";

describe("Worker edge: a private publicUrl is refused (OUTBOUND_ALLOW_PRIVATE unset)", () => {
  let h: WorkerHarness;
  beforeAll(async () => {
    h = await openWorkerHarness(undefined, { OUTBOUND_ALLOW_PRIVATE: "false" });
  });
  afterAll(async () => h?.close());

  async function seed(publicUrl: (edgeUrl: string) => string) {
    const orgId = newId("org");
    const userId = newId("usr");
    await h.db.insert(organizations).values({ id: orgId, name: "Worker guard" });
    await h.db.insert(users).values({ id: userId, email: `${userId}@example.test`, name: "Admin" });
    const { row: server, token } = await registerServer(h.db, h.keyring, { orgId, userId, name: "box" }, new Date());
    const deploymentId = newId("dpl");
    const started = await fetch(`${inject("serverEdgeControlUrl")}/start`, { method: "POST", body: JSON.stringify({ token, deploymentIds: [deploymentId] }) });
    if (!started.ok) throw new Error(`the server edge did not start: ${await started.text()}`);
    const edge = (await started.json()) as { url: string; appPort: number };
    // Written through the store, as a row from before the check would be.
    await updateServer(h.db, orgId, server.id, { publicUrl: publicUrl(edge.url) }, new Date());
    const projectId = newId("prj");
    const slug = `wg-${projectId.slice(-10).toLowerCase()}`;
    const environmentId = newId("env");
    await h.db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
    await h.db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
    await h.db
      .insert(deployments)
      .values({ id: deploymentId, orgId, projectId, environmentId, status: "ready", current: true, source: "git", placement: "server", serverId: server.id });
    await setServing(h.db, deploymentId, server.id, edge.appPort, new Date());
    return `${slug}.${SHARED}`;
  }

  it("a loopback or metadata literal is answered 502 server_refused, without the app's answer", async () => {
    for (const url of [(e: string) => e, () => "http://169.254.169.254", () => "http://10.0.0.7:8080"]) {
      const host = await seed(url);
      const res = await h.request("/", { headers: { host, "cf-connecting-ip": "203.0.113.5" } });
      expect(res.status).toBe(502);
      expect(res.headers.get("x-workspace-edge")).toBe("server_refused");
      const text = await res.text();
      expect(text).toContain("private or internal address");
      expect(res.headers.get("content-type")).toContain("text/html");
    }
    expect(h.logs.join("\n")).toMatch(/edge_forward_refused/);
  });
});
