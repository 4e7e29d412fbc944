/**
 * Sleep mode on `npm start`'s server (runner and edge on, Postgres, SLEEP_AFTER
 * 1 s): an idle `auto_sleep` app is stopped and the project reads `asleep`; the
 * next request through the edge wakes it and is held until the app answers;
 * `always_on` wakes a sleeping app at once and keeps it running.
 */
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { startGitServer, type GitTestServer } from "../support/git-server";
import { alive } from "../support/runner-client";
import { pushApp, runnerFixture } from "../support/runner-harness";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const TOKEN = "sleep-mode-owner-token-0123456789abcdef0123456789";
const SHARED = "apps.test";

let git: GitTestServer;
let fixture: Awaited<ReturnType<typeof runnerFixture>>;
let server: RunningServer;
let port: number;

beforeAll(async () => {
  git = await startGitServer();
  fixture = await runnerFixture("sleep_mode");
  const config = loadNodeConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: fixture.dataDir,
    DATABASE_URL: fixture.db.url,
    SECRET_KEYS: TEST_SECRET_KEYS,
    WORKSPACE_OWNER_TOKEN: TOKEN,
    LOG_LEVEL: "silent",
    SHARED_DOMAIN: SHARED,
    OUTBOUND_ALLOW_PRIVATE: "true",
    GIT_GITEA_URL: git.url,
    RUNNER: "on",
    HEALTH_TIMEOUT: "20s",
    STOP_GRACE: "1s",
    SLEEP_AFTER: "1s",
  });
  server = await startSelfHosted(config, () => {});
  port = Number(new URL(server.url).port);
}, 60_000);

afterAll(async () => {
  await server?.close();
  await git?.close();
  await fixture?.drop();
});

async function api<T>(method: string, path: string, json?: unknown, expected = 200): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(json ? { "content-type": "application/json" } : {}) },
    body: json ? JSON.stringify(json) : undefined,
  });
  const body = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${body}`);
  return (body ? JSON.parse(body) : undefined) as T;
}

function viaEdge(host: string) {
  return new Promise<{ status: number; pid?: number }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/", headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode!, pid: res.statusCode === 200 ? JSON.parse(body).pid : undefined }));
    });
    req.on("error", reject);
    req.end();
  });
}

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
    const repo = await git.createRepo();
    await pushApp(git, repo.owner, repo.repo);
    await api("POST", `/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
    const d = await api<{ id: string }>("POST", "/api/deployments", { projectId: project.id }, 201);
    await until("ready", 60_000, async () => ((await api<{ status: string }>("GET", `/api/deployments/${d.id}`)).status === "ready" ? true : undefined));
    const first = await viaEdge(host);
    expect(first.status).toBe(200);

    // Idle: asleep within SLEEP_AFTER plus one reconcile (5 s); the process is gone.
    await until("asleep", 20_000, async () => ((await asleep(project.id)) ? true : undefined));
    await until("stopped", 5_000, async () => (alive(first.pid!) ? undefined : true));
    const logs = await api<{ items: Array<{ message: string; stream: string }> }>("GET", `/api/projects/${project.id}/logs?stream=system`);
    expect(logs.items.some((l) => l.message.startsWith("Asleep: no request"))).toBe(true);

    // The next request wakes it and is held until it answers.
    const woken = await viaEdge(host);
    expect(woken.status).toBe(200);
    expect(woken.pid).not.toBe(first.pid);
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
    expect(alive(up.pid!)).toBe(true);
  }, 120_000);
});
