/**
 * Verified live, with `npm start`'s server (runner on, sandbox, Postgres) and a
 * smoke window of 4 s: a new deployment whose app answers and then crashes
 * 3 s later fails in the window, saying so, with `deploy.failed` (stage
 * `smoke`), and the previous deployment serves every request of a loop
 * through the edge meanwhile (it was never stopped).
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { pushApp } from "../../support/runner-harness";
import { SHARED_DOMAIN, useSelfHostedServer } from "../../support/self-hosted-server";

const { api, viaEdge, git, databaseUrl } = useSelfHostedServer("smoke_window", { SMOKE_WINDOW: "4s" });

interface Deployment {
  id: string;
  status: string;
  current: boolean;
  failureReason: string | null;
}

async function settle(id: string): Promise<Deployment> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const d = await api<Deployment>("GET", `/api/deployments/${id}`);
    if (d.status === "ready" || d.status === "failed") return d;
    if (Date.now() > deadline) throw new Error(`deployment still ${d.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the smoke window (npm start's server, SMOKE_WINDOW=4s)", () => {
  it("fails a deployment whose app crashes 3 s after answering; the previous one serves every request meanwhile", async () => {
    const project = await api<{ id: string; slug: string }>("POST", "/api/projects", { name: "Smoke window app" }, 201);
    const host = `${project.slug}.${SHARED_DOMAIN}`;
    const repo = await git().createRepo();
    await pushApp(git(), repo.owner, repo.repo);
    await api("POST", `/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
    await api("PATCH", `/api/projects/${project.id}/env`, { upserts: [{ key: "APP_VERSION", value: "steady" }] });
    const first = await api<Deployment>("POST", "/api/deployments", { projectId: project.id }, 201);
    const t0 = Date.now();
    expect(await settle(first.id)).toMatchObject({ status: "ready", current: true });
    // Ready only after the window.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4000);

    // The next version answers, then exits (code 9) 3 s after it started.
    await api("PATCH", `/api/projects/${project.id}/env`, {
      upserts: [
        { key: "APP_VERSION", value: "flaky" },
        { key: "CRASH_AFTER_MS", value: "3000" },
      ],
    });
    const answers: string[] = [];
    let stop = false;
    const loop = (async () => {
      while (!stop) {
        const res = await viaEdge(host);
        answers.push(res.status === 200 ? JSON.parse(res.body).version : `${res.status} ${res.edge ?? ""}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const second = await api<Deployment>("POST", "/api/deployments", { projectId: project.id }, 201);
    const failed = await settle(second.id);
    stop = true;
    await loop;

    expect(failed.status).toBe("failed");
    expect(failed.failureReason).toMatch(
      /^start failed: the app exited with code 9 [23](\.\d)? s after it first answered, within the smoke window \(SMOKE_WINDOW, 4 s\)/,
    );
    expect(answers.length).toBeGreaterThan(20);
    expect(new Set(answers)).toEqual(new Set(["steady"]));
    expect(await api<Deployment>("GET", `/api/deployments/${first.id}`)).toMatchObject({ status: "ready", current: true });
    expect(JSON.parse((await viaEdge(host)).body).version).toBe("steady");

    // One deploy.failed, stage smoke (the event follows the status: given a moment).
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      const stages = async () =>
        (
          await client.query<{ stage: string }>(
            "select data->>'stage' as stage from notification_events where category = 'deploy.failed' and data->>'deploymentId' = $1",
            [second.id],
          )
        ).rows.map((r) => r.stage);
      const deadline = Date.now() + 10_000;
      while ((await stages()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(await stages()).toEqual(["smoke"]);
    } finally {
      await client.end();
    }
  }, 120_000);
});
