/**
 * The edge as `npm start` runs it: one self-hosted server (real listener, runner
 * on, Postgres) building the fixture app from the test git host, then serving it
 * on `<slug>.<SHARED_DOMAIN>` through the same port as the API. A redeploy and a
 * promote switch traffic with no failed request through the edge; the requests
 * are in the project's server logs; disabling takes the route offline.
 */
import { describe, expect, it } from "vitest";
import { pushApp } from "../support/runner-harness";
import { SHARED_DOMAIN as SHARED, useSelfHostedServer } from "../support/self-hosted-server";

const { api, viaEdge, git: gitServer } = useSelfHostedServer("edge_e2e");

async function waitReady(id: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const d = await api<{ status: string; failureReason: string | null }>("GET", `/api/deployments/${id}`);
    if (d.status === "ready") return;
    if (d.status === "failed" || d.status === "canceled") throw new Error(`deployment ${d.status}: ${d.failureReason}`);
    if (Date.now() > deadline) throw new Error(`deployment still ${d.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Requests through the edge until `done`; counts answers that are not the app's 200. */
function requestLoop(host: string) {
  let stop = false;
  const versions = new Set<string>();
  const failures: string[] = [];
  let count = 0;
  const running = (async () => {
    while (!stop) {
      try {
        const res = await viaEdge(host);
        if (res.status === 200) versions.add(JSON.parse(res.body).version);
        else failures.push(`${res.status} ${res.edge ?? ""}`);
      } catch (e) {
        failures.push((e as Error).message);
      }
      count++;
    }
  })();
  return {
    versions,
    failures,
    count: () => count,
    finish: async () => {
      stop = true;
      await running;
    },
  };
}

describe("edge end to end (npm start's server, runner on, Postgres)", () => {
  it("serves the deployed app on its free route; a redeploy and a promote switch with no failed request; server logs record them", async () => {
    const project = await api<{ id: string; slug: string; status: string }>("POST", "/api/projects", { name: "Edge e2e app" }, 201);
    const host = `${project.slug}.${SHARED}`;
    // The new project's routes reach the edge at once (within a second on a quiet machine: the domains suite
    // measures that; here, among every other suite on 2 cores, it is given 5 s).
    const seenBy = Date.now() + 5000;
    let before = await viaEdge(host);
    while (before.edge !== "not_deployed" && Date.now() < seenBy) {
      await new Promise((r) => setTimeout(r, 20));
      before = await viaEdge(host);
    }
    expect(before.edge).toBe("not_deployed");

    const git = gitServer();
    const repo = await git.createRepo();
    await pushApp(git, repo.owner, repo.repo);
    await api("POST", `/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
    await api("PATCH", `/api/projects/${project.id}/env`, { upserts: [{ key: "APP_VERSION", value: "v1" }] });
    const first = await api<{ id: string }>("POST", "/api/deployments", { projectId: project.id }, 201);
    await waitReady(first.id);
    const v1 = await viaEdge(host, "/hello?secret=s3cr3t-query");
    expect(v1.status).toBe(200);
    expect(JSON.parse(v1.body).version).toBe("v1");
    // The API still answers on the same port for its own Host.
    expect((await api<{ status: string }>("GET", `/api/projects/${project.id}`)).status).toBe("live");

    // Redeploy under a request loop through the edge.
    await api("PATCH", `/api/projects/${project.id}/env`, { upserts: [{ key: "APP_VERSION", value: "v2" }] });
    const loop = requestLoop(host);
    const second = await api<{ id: string }>("POST", "/api/deployments", { projectId: project.id }, 201);
    await waitReady(second.id);
    await new Promise((r) => setTimeout(r, 2500));
    await loop.finish();
    expect(loop.failures).toEqual([]);
    expect(loop.count()).toBeGreaterThan(20);
    expect(loop.versions).toEqual(new Set(["v1", "v2"]));

    // Promote the first back: started from its kept build, no failed request meanwhile.
    const back = requestLoop(host);
    await api("POST", `/api/deployments/${first.id}/promote`, {});
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const res = await viaEdge(host);
      if (res.status === 200 && JSON.parse(res.body).version === "v1") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 2500));
    await back.finish();
    expect(back.failures).toEqual([]);
    expect(back.versions).toEqual(new Set(["v1", "v2"]));
    expect(JSON.parse((await viaEdge(host)).body).version).toBe("v1");

    // Every request is a server-log line, without its query.
    const logs = await api<{ items: Array<{ path: string; status: number; host: string }> }>(
      "GET",
      `/api/projects/${project.id}/server-logs/recent?path=/hello&limit=10`,
    );
    expect(logs.items).toHaveLength(1);
    expect(logs.items[0]).toMatchObject({ path: "/hello", status: 200, host });
    const all = await api<{ items: unknown[] }>("GET", `/api/projects/${project.id}/server-logs/recent?limit=1000`);
    expect(JSON.stringify(all)).not.toContain("s3cr3t-query");

    // Disabled: the edge answers 503 itself within a second.
    await api("POST", `/api/projects/${project.id}/disable`);
    const offBy = Date.now() + 1000;
    let off = await viaEdge(host);
    while (off.status !== 503 && Date.now() < offBy) off = await viaEdge(host);
    expect(off.edge).toBe("disabled");
  }, 120_000);
});
