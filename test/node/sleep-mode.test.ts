/**
 * Sleep mode on `npm start`'s server (runner and edge on, Postgres, SLEEP_AFTER
 * 1 s): an idle `auto_sleep` app is stopped and the project reads `asleep`; the
 * next request through the edge wakes it and is held until the app answers;
 * `always_on` wakes a sleeping app at once and keeps it running.
 *
 * The app runs in the runner's sandbox: "a new process" is a new `instance`
 * (the fixture's id of its process: its pid is its pid namespace's own), and
 * whether it runs is asked of the host by the deployment's cgroup (processesOf).
 */
import { describe, expect, it } from "vitest";
import { processesOf } from "../support/runner-client";
import { pushApp } from "../support/runner-harness";
import { SHARED_DOMAIN as SHARED, useSelfHostedServer } from "../support/self-hosted-server";

const { api, viaEdge: edgeAnswer, git: gitServer } = useSelfHostedServer("sleep_mode", { SLEEP_AFTER: "1s" });

/** The edge's answer with the app's instance (the fixture app reports one, new at every start). */
const viaEdge = async (host: string) => {
  const res = await edgeAnswer(host);
  return { status: res.status, instance: res.status === 200 ? (JSON.parse(res.body).instance as string) : undefined };
};

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const asleep = async (id: string) => (await api<{ asleep: boolean }>("GET", `/api/projects/${id}`)).asleep;

describe("sleep mode (self-hosted)", () => {
  it("an idle auto_sleep app sleeps, the next request wakes it and waits for it; always_on wakes it and keeps it up", async () => {
    const project = await api<{ id: string; slug: string; asleep: boolean }>("POST", "/api/projects", { name: "Sleepy app" }, 201);
    expect(project.asleep).toBe(false);
    const host = `${project.slug}.${SHARED}`;
    const git = gitServer();
    const repo = await git.createRepo();
    await pushApp(git, repo.owner, repo.repo);
    await api("POST", `/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
    const d = await api<{ id: string }>("POST", "/api/deployments", { projectId: project.id }, 201);
    await until("ready", 60_000, async () => ((await api<{ status: string }>("GET", `/api/deployments/${d.id}`)).status === "ready" ? true : undefined));
    const first = await viaEdge(host);
    expect(first.status).toBe(200);

    // Idle: asleep within SLEEP_AFTER plus one reconcile (5 s); the process is gone.
    await until("asleep", 20_000, async () => ((await asleep(project.id)) ? true : undefined));
    await until("stopped", 5_000, async () => (processesOf(d.id).length > 0 ? undefined : true));
    // The system line saying why: stored by the log writer's next batch (FLUSH_MS), so read once it is there.
    const systemLines = async () =>
      (await api<{ items: Array<{ message: string; stream: string }> }>("GET", `/api/projects/${project.id}/logs?stream=system`)).items;
    await until("the Asleep line stored", 5_000, async () =>
      (await systemLines()).some((l) => l.message.startsWith("Asleep: no request")) ? true : undefined,
    );

    // The next request wakes it and is held until it answers.
    const woken = await viaEdge(host);
    expect(woken.status).toBe(200);
    expect(woken.instance).not.toBe(first.instance);
    expect(await asleep(project.id)).toBe(false);

    // Asleep again, then always_on wakes it at once, without a request.
    await until("asleep again", 20_000, async () => ((await asleep(project.id)) ? true : undefined));
    await api("POST", `/api/projects/${project.id}/sleep-mode`, { sleepMode: "always_on" });
    await until("awake", 10_000, async () => ((await asleep(project.id)) ? undefined : true));
    const up = await until("answering", 10_000, async () => {
      const res = await viaEdge(host);
      return res.status === 200 ? res : undefined;
    });
    // And it stays up past SLEEP_AFTER and a reconcile.
    await new Promise((r) => setTimeout(r, 7_000));
    expect(await asleep(project.id)).toBe(false);
    expect(processesOf(d.id).length).toBeGreaterThan(0);
    expect((await viaEdge(host)).instance).toBe(up.instance);
  }, 120_000);
});
