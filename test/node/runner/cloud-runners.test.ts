/**
 * Build servers attached to the cloud (issue 22, item 8): the Worker in workerd
 * (test/support/cloud-worker.ts: Neon driver to Postgres, presigned uploads on the
 * run's S3 server) with two real `wsp runner` processes, A and B, each serving its
 * apps' edge on a loopback port that its server's publicUrl names. A reaches the
 * API through a TCP proxy the test pauses (an API outage as A sees it); the
 * Worker still reaches A's edge directly, as Cloudflare reaches a server.
 *
 * In order (the tests share the runners): placement by Settings' defaultServerId,
 * an explicit serverId and labels, with the build log read back through the
 * Worker's log routes and the app through the Worker's forwarding; a git
 * deployment from git's own http-backend; the API gone
 * for 30 s while A's app keeps answering (meanwhile: runner tokens on user routes
 * and other organizations' jobs, a deleted server's token, drain); A killed
 * mid-build, its job finished by B after the lease, and A restarted on its work
 * directory bringing its app back.
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deployments, environments, projects } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { useCleanups } from "../../support/cleanups";
import { useCloudWorker } from "../../support/cloud-worker";
import { type GitTestServer, startGitServer } from "../../support/git-server";
import { expectStatus, type Member } from "../../support/harness";
import { pushApp } from "../../support/runner-harness";
import {
  appFolder,
  freePort,
  getWithHost,
  killRunners,
  type PausableProxy,
  queueFolderDeploy,
  startPausableProxy,
  startWspRunner,
  until,
  type WspRunner,
  wspCli,
} from "../../support/wsp-runner";

const { tempDir } = useCleanups("ws-cloud-runners-");
// A git host of this file's own (git's `git http-backend`), started before the cloud so that the
// Worker is given its URL: its bare repositories are on this disk, so the fixture app is pushed there.
let git: GitTestServer;
const gitBindings: Record<string, string> = {};
beforeAll(async () => {
  git = await startGitServer();
  gitBindings.GIT_GITEA_URL = git.url;
});
afterAll(async () => git?.close());
const cloud = useCloudWorker({ bindings: gitBindings });

interface Registered {
  id: string;
  token: string;
  edge: number;
}

let t: Member;
let a: Registered;
let b: Registered;
let proxy: PausableProxy;
let runnerA: WspRunner;
let runnerB: WspRunner;
let workA: string;
/** The project wsp deploy created (served on A after the placement tests) and its free route. */
let projectId: string;
let hostname: string;

const api = async <T = any>(path: string, init: { method?: string; json?: unknown; token?: string } = {}, expected = 200): Promise<T> =>
  expectStatus<T>(await cloud.request(path, { token: t.token, org: t.orgId, ...init }), expected);

async function register(name: string, labels: string[]): Promise<Registered> {
  const edge = await freePort();
  const s = await api<{ id: string; token: string }>("/api/servers", { method: "POST", json: { name, labels, publicUrl: `http://127.0.0.1:${edge}` } }, 201);
  return { ...s, edge };
}

const runner = (s: Registered, apiUrl: string, workDir: string) =>
  // The runner clones from the git host itself: its own setting, as the Worker's.
  startWspRunner({ api: apiUrl, token: s.token, workDir, args: ["--edge-port", String(s.edge)], env: { GIT_GITEA_URL: git.url } });

const row = async (id: string) => (await cloud.db.select().from(deployments).where(eq(deployments.id, id)))[0]!;

/** Waits for the deployment's end: ready (its row), else the test fails with both runners' output. */
async function ready(id: string, timeoutMs = 90_000) {
  const d = await until(
    `deployment ${id} to end`,
    async () => {
      const r = await row(id);
      return ["ready", "failed", "canceled"].includes(r.status) && r;
    },
    timeoutMs,
  );
  expect(d.status, `${d.failureReason}\n--- A ---\n${runnerA.out().slice(-3000)}\n--- B ---\n${runnerB.out().slice(-3000)}`).toBe("ready");
  return d;
}

/** The app's answer through the Worker (Host: its free route), forwarded to its server's edge. */
const throughWorker = () => getWithHost(`${cloud.url}/`, hostname);

beforeAll(async () => {
  if (!cloud.url) return;
  t = await cloud.seedTenant();
  a = await register("cloud-a", ["edge-a"]);
  b = await register("cloud-b", ["fast"]);
  proxy = await startPausableProxy(Number(new URL(cloud.url).port));
  workA = tempDir("ws-cloud-work-a-");
  runnerA = runner(a, proxy.url, workA);
  runnerB = runner(b, cloud.url, tempDir("ws-cloud-work-b-"));
  await until("both servers online", async () => {
    const list = await api<{ items: Array<{ id: string; status: string }> }>("/api/servers");
    return list.items.filter((s) => s.status === "online").length === 2;
  });
}, 90_000);
afterAll(async () => {
  killRunners();
  await proxy?.close();
});

describe("wsp runner attached to the cloud Worker", () => {
  it("Settings' defaultServerId places an upload deployment; the build log comes back through the Worker's log routes; the app answers through the Worker's forwarding", {
    timeout: 120_000,
  }, async () => {
    await api("/api/settings/deploy-defaults", { method: "PATCH", json: { defaultDeployTarget: "server", defaultServerId: a.id } });
    const deployed = await wspCli(["deploy", appFolder(0, tempDir("ws-cloud-app-")), "--api", cloud.url, "--token", t.token]);
    expect(deployed.code, `${deployed.out}\n${deployed.err}\n--- A ---\n${runnerA.out().slice(-3000)}`).toBe(0);
    // wsp deploy followed the build log, as runner A sent it, through the Worker's stream route.
    expect(deployed.out).toContain("Unpacking the uploaded source");
    expect(deployed.out).toContain("building the fixture app\n");
    const id = /Deployment (dpl_[0-9a-z]+) is ready/.exec(deployed.out)?.[1];
    expect(id, deployed.out).toBeDefined();
    const d = await row(id!);
    expect(d).toMatchObject({ status: "ready", current: true, placement: "server", serverId: a.id, servedBy: a.id });
    projectId = d.projectId;
    hostname = (await api<{ routes: { free: { hostname: string } } }>(`/api/projects/${projectId}`)).routes.free.hostname;

    const answer = await throughWorker();
    expect(answer.status, answer.body.slice(0, 300)).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ version: "1" });
    // A's edge serves only what the Worker signed.
    const direct = await getWithHost(`http://127.0.0.1:${a.edge}/`, hostname);
    expect(direct.status).toBe(403);
    // The app's runtime line, sent by A, and the request line the Worker's edge wrote, through the project's log routes.
    await until("the app's runtime line", async () => {
      const page = await api<{ items: Array<{ message: string }> }>(`/api/projects/${projectId}/logs`);
      return page.items.some((l) => l.message.includes("starting version 1"));
    });
    await until("the Worker's request line", async () => {
      const page = await api<{ items: Array<{ host: string | null; status: number; deploymentId: string | null }> }>(
        `/api/projects/${projectId}/server-logs/recent`,
      );
      return page.items.some((l) => l.host === hostname && l.status === 200 && l.deploymentId === id);
    });
  });

  it("an explicit serverId wins over the default server; labels place on a server carrying them all", { timeout: 120_000 }, async () => {
    const onB = await api<{ id: string; serverId: string | null }>("/api/deployments", { method: "POST", json: { projectId, serverId: b.id } }, 201);
    expect(onB.serverId).toBe(b.id);
    expect(await ready(onB.id)).toMatchObject({ servedBy: b.id, current: true });
    expect((await throughWorker()).status).toBe(200);

    const byLabel = await api<{ id: string; serverId: string | null; serverLabels: string[] }>(
      "/api/deployments",
      { method: "POST", json: { projectId, labels: ["edge-a"] } },
      201,
    );
    expect(byLabel).toMatchObject({ serverId: null, serverLabels: ["edge-a"] });
    expect(await ready(byLabel.id)).toMatchObject({ servedBy: a.id, current: true });
    const answer = await throughWorker();
    expect(answer.status, answer.body.slice(0, 300)).toBe(200);
  });

  it("a git deployment (the branch's head on git's own http-backend) is built on the server its labels place it on; its build log and app come back through the Worker", {
    timeout: 120_000,
  }, async () => {
    const repo = await git.createRepo();
    const sha = await pushApp(git, repo.owner, repo.repo);
    const p = await api<{ id: string; routes: { free: { hostname: string } } }>(
      "/api/projects",
      { method: "POST", json: { name: `cloud git ${repo.repo.slice(-8)}`, gitProvider: "gitea", gitOwner: repo.owner, gitRepo: repo.repo } },
      201,
    );
    const queued = await api<{ id: string; commitSha: string | null }>(
      "/api/deployments",
      { method: "POST", json: { projectId: p.id, labels: ["fast"] } },
      201,
    );
    expect(queued.commitSha).toBe(sha);
    expect(await ready(queued.id)).toMatchObject({ servedBy: b.id, current: true, source: "git" });
    const log = await api<{ items: Array<{ message: string }> }>(`/api/deployments/${queued.id}/logs`);
    expect(log.items.map((l) => l.message).join("\n")).toContain("building the fixture app");
    const answer = await getWithHost(`${cloud.url}/`, p.routes.free.hostname);
    expect(answer.status, answer.body.slice(0, 300)).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ version: "1" });
  });

  it("the API unreachable from A for 30 s: A's app keeps answering through its edge; meanwhile runner tokens are refused where they do not belong, a deleted server's at once, and drained servers take no work", {
    timeout: 150_000,
  }, async () => {
    await proxy.pause();
    const pausedAt = Date.now();
    // The Worker reaches A's edge directly: every request in the outage must be the app's own answer.
    const answers: number[] = [];
    const polling = (async () => {
      while (Date.now() - pausedAt < 30_000) {
        const res = await throughWorker().catch((e) => ({ status: 0, body: String(e) }));
        answers.push(res.status);
        expect(res.status, res.body.slice(0, 300)).toBe(200);
        await new Promise((r) => setTimeout(r, 500));
      }
    })();

    // A runner token on a user route: 403; on another organization's job: 404.
    expect((await cloud.request("/api/projects", { token: b.token })).status).toBe(403);
    const foreign = await foreignJob();
    expect((await cloud.request(`/api/runner/jobs/${foreign}`, { token: b.token })).status).toBe(404);
    expect((await cloud.request(`/api/runner/jobs/${foreign}/renew`, { method: "POST", token: b.token })).status).toBe(404);

    // A deleted server's token: refused on the next request.
    const doomed = await register("cloud-doomed", []);
    const beat = () => cloud.request("/api/runner/heartbeat", { method: "POST", token: doomed.token, json: {} });
    expect((await beat()).status).toBe(200);
    await api(`/api/servers/${doomed.id}`, { method: "DELETE" });
    expect((await beat()).status).toBe(401);

    // Drain: neither server takes new work; the deployment waits, saying why.
    for (const s of [a, b]) await api(`/api/servers/${s.id}`, { method: "PATCH", json: { draining: true } });
    const waiting = await api<{ id: string }>("/api/deployments", { method: "POST", json: { projectId, target: "server", labels: ["fast"] } }, 201);
    await new Promise((r) => setTimeout(r, 3000));
    expect(await api(`/api/deployments/${waiting.id}`)).toMatchObject({ status: "queued", waitingFor: "all_draining" });
    await api(`/api/deployments/${waiting.id}/cancel`, { method: "POST" });
    for (const s of [a, b]) await api(`/api/servers/${s.id}`, { method: "PATCH", json: { draining: false } });

    await polling;
    expect(answers.length).toBeGreaterThan(20);
    const resumedAt = new Date();
    await proxy.resume();
    // A is heard again (its claim loop retries with backoff; a claim counts as a heartbeat).
    await until("A heard after the outage", async () => {
      const s = await api<{ lastSeenAt: string | null; status: string }>(`/api/servers/${a.id}`);
      return s.lastSeenAt !== null && new Date(s.lastSeenAt) >= resumedAt && s.status === "online";
    });
    expect(runnerA.child.exitCode).toBeNull();
  });

  it("A killed mid-build: B finishes the job once the lease ran out; A restarted on its work directory brings its app back", { timeout: 150_000 }, async () => {
    // Any server may take it (no default server); B drains so that A claims it first.
    await api("/api/settings/deploy-defaults", { method: "PATCH", json: { defaultDeployTarget: null, defaultServerId: null } });
    await api(`/api/servers/${b.id}`, { method: "PATCH", json: { draining: true } });
    const slow = await queueFolderDeploy(cloud.url, t.token, appFolder(8, tempDir("ws-cloud-slow-")));
    await until("the slow build on A", async () => {
      const d = await row(slow);
      return d.status === "building" && d.claimedBy === a.id;
    });
    runnerA.child.kill("SIGKILL");
    await runnerA.exited;
    // Its lease (30 s) runs out: made so here rather than waited for.
    await cloud.db
      .update(deployments)
      .set({ leaseExpiresAt: new Date(Date.now() - 1000) })
      .where(eq(deployments.id, slow));
    await api(`/api/servers/${b.id}`, { method: "PATCH", json: { draining: false } });
    expect(await ready(slow, 120_000)).toMatchObject({ servedBy: b.id, current: true });

    // A's app (the first project's current deployment) is down with A; restarted on the same work directory, A brings it back.
    runnerA = runner(a, proxy.url, workA);
    const back = await until("the first project's app back through the Worker", async () => {
      const res = await throughWorker().catch(() => undefined);
      return res?.status === 200 && res;
    });
    expect(JSON.parse(back.body)).toMatchObject({ version: "1" });
  });
});

/** A queued deployment of another organization, placed on a server (rows written directly: only its id matters). */
async function foreignJob(): Promise<string> {
  const other = await cloud.seedTenant();
  const project = newId("prj");
  const environment = newId("env");
  const id = newId("dpl");
  await cloud.db
    .insert(projects)
    .values({ id: project, orgId: other.orgId, name: `foreign-${project.slice(-8)}`, slug: `foreign-${project.slice(-8).toLowerCase()}` });
  await cloud.db.insert(environments).values({ id: environment, orgId: other.orgId, projectId: project, name: "production", kind: "production" });
  await cloud.db
    .insert(deployments)
    .values({ id, orgId: other.orgId, projectId: project, environmentId: environment, status: "queued", source: "upload", placement: "server" });
  return id;
}
