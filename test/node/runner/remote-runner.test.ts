/**
 * `wsp runner` attached to a self-hosted instance (issue 22): the instance runs
 * no runner of its own (RUNNER=off: placement `auto` then sends every deployment
 * to a server), a real `wsp runner` child process with a server's runner token
 * claims over HTTP, builds in its sandbox and runs the app; `wsp deploy` follows
 * the build log through the API's log routes. Then: SIGTERM hands a build back
 * to the queue; a runner killed mid-build (SIGKILL) loses the job to another
 * once its lease ran out; a draining server takes no new work; a deleted
 * server's runner is refused at once and stops. One instance (Postgres of its
 * own) for the file; each test registers its own servers.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../../functions/self-hosted/start";
import { openPostgres, type PostgresDatabase } from "../../../shared/db/postgres";
import { deployments } from "../../../shared/db/schema";
import { useCleanups } from "../../support/cleanups";
import { freshDatabase } from "../../support/fresh-database";
import { type Harness, type Member, seedTenant } from "../../support/harness";
import { untilNoProcessOf } from "../../support/runner-client";
import { appFolder as fixtureFolder, killRunners, queueFolderDeploy, startWspRunner, until, wspCli } from "../../support/wsp-runner";

const { tempDir } = useCleanups("ws-remote-runner-");

let server: RunningServer;
let db: PostgresDatabase;
let dataDir: string;
let dropDatabase: () => Promise<void>;

beforeAll(async () => {
  const own = await freshDatabase(inject("pgUrl"), "ws_remote_runner", { migrate: true });
  dropDatabase = () => own.drop();
  dataDir = mkdtempSync(join(tmpdir(), "ws-remote-runner-data-"));
  server = await startSelfHosted(
    loadNodeConfig({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", DATA_DIR: dataDir, DATABASE_URL: own.url, SHARED_DOMAIN: "apps.test", RUNNER: "off" }),
    () => {},
  );
  db = await openPostgres(own.url, { migrate: false, max: 2 });
}, 60_000);
afterAll(async () => {
  killRunners();
  await server?.close();
  await db?.close();
  await dropDatabase?.();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const newTenant = () => seedTenant({ db: db.db } as unknown as Harness);

const api = async <T = any>(t: Member, path: string, init: RequestInit = {}, expected = 200): Promise<T> => {
  const res = await fetch(`${server.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json", ...init.headers },
  });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${path}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
};

const register = (t: Member, name: string) => api<{ id: string; token: string }>(t, "/api/servers", { method: "POST", body: JSON.stringify({ name }) }, 201);

/** `wsp runner` against this instance, on its own work directory. */
const startRunner = (token: string, workDir: string, more: string[] = []) => startWspRunner({ api: server.url, token, workDir, args: more });
const appFolder = (slowBuild = 0) => fixtureFolder(slowBuild, tempDir("ws-remote-app-"));

const row = async (id: string) => (await db.db.select().from(deployments).where(eq(deployments.id, id)))[0]!;

/** Queues a deploy of `dir` without waiting; its deployment id. */
const queueDeploy = (t: Member, dir: string) => queueFolderDeploy(server.url, t.token, dir);

describe("wsp runner attached to a self-hosted instance", () => {
  it("claims an upload deployment placed on its server, builds and runs it; the build log reaches the API's log routes; the app answers on the port it reported", {
    timeout: 180_000,
  }, async () => {
    const t = await newTenant();
    const s = await register(t, "remote-a");
    const edgePort = 30_000 + Math.floor(Math.random() * 20_000);
    const runner = startRunner(s.token, tempDir("ws-remote-work-"), ["--edge-port", String(edgePort)]);
    try {
      const deployed = await wspCli(["deploy", appFolder(), "--api", server.url, "--token", t.token]);
      expect(deployed.code, `${deployed.out}\n${deployed.err}\n${runner.out()}`).toBe(0);
      // The build log, as the remote runner sent it, read back through the API's log routes by wsp deploy.
      expect(deployed.out).toContain("Unpacking the uploaded source");
      expect(deployed.out).toContain("building the fixture app\n");
      expect(deployed.out).toMatch(/Ready: the app answers on port \d+\n/);
      const id = /Deployment (dpl_[0-9a-z]+) is ready/.exec(deployed.out)?.[1];
      expect(id, deployed.out).toBeDefined();
      const d = await row(id!);
      expect(d).toMatchObject({ status: "ready", current: true, placement: "server", servedBy: s.id });
      const answer = (await (await fetch(`http://127.0.0.1:${d.port}/`)).json()) as { version: string };
      expect(answer.version).toBe("1");
      // Its edge serves only what the control plane's edge forwarded and signed.
      const unsigned = await fetch(`http://127.0.0.1:${edgePort}/`, { headers: { "x-wsp-deployment": id! } });
      expect(unsigned.status).toBe(403);
      // Runtime lines too, through the project's log route.
      const runtime = await until("the app's runtime line", async () => {
        const page = await api<{ items: Array<{ message: string }> }>(t, `/api/projects/${d.projectId}/logs`);
        return page.items.some((l) => l.message.includes("starting version 1")) && page.items;
      });
      expect(runtime.length).toBeGreaterThan(0);
      // The server reports itself with its sandbox and limits.
      const seen = await api<{ status: string; capacity: number; sandbox: Record<string, unknown>; version: string }>(t, `/api/servers/${s.id}`);
      expect(seen).toMatchObject({ status: "online", capacity: 1, version: "0.1.0" });
      expect(seen.sandbox).toHaveProperty("confined");

      // SIGTERM while it builds: the job goes back to the queue, the app stops and its port is forgotten; restarted, it builds the job and brings nothing stale back.
      const next = await queueDeploy(t, appFolder(12));
      await until("the slow build", async () => (await row(next)).status === "building");
      runner.child.kill("SIGTERM");
      expect(await runner.exited).toBe(0);
      expect(await row(next)).toMatchObject({ status: "queued", claimedBy: null });
      expect((await row(id!)).port).toBeNull();
      await untilNoProcessOf(id!);
    } finally {
      runner.child.kill("SIGKILL");
    }
  });

  it("a runner killed mid-build loses the job to another server once its lease ran out; a draining server takes no new work; a deleted server's runner is refused at once", {
    timeout: 180_000,
  }, async () => {
    const t = await newTenant();
    const a = await register(t, "remote-killed");
    const first = startRunner(a.token, tempDir("ws-remote-work-"));
    const id = await queueDeploy(t, appFolder(12));
    await until("the build on the first server", async () => {
      const d = await row(id);
      return d.status === "building" && d.claimedBy === a.id;
    });
    first.child.kill("SIGKILL");
    await first.exited;
    // Its lease (30 s) runs out: made so here rather than waited for.
    await db.db
      .update(deployments)
      .set({ leaseExpiresAt: new Date(Date.now() - 1000) })
      .where(eq(deployments.id, id));
    const b = await register(t, "remote-second");
    const second = startRunner(b.token, tempDir("ws-remote-work-"));
    try {
      const done = await until(
        "the second server's build",
        async () => {
          const d = await row(id);
          return d.status === "ready" && d;
        },
        120_000,
      );
      expect(done).toMatchObject({ servedBy: b.id, current: true });
      const answer = (await (await fetch(`http://127.0.0.1:${done.port}/`)).json()) as { version: string };
      expect(answer.version).toBe("1");

      // Drain: the server takes no new work; the deployment waits, saying why.
      await api(t, `/api/servers/${b.id}`, { method: "PATCH", body: JSON.stringify({ draining: true }) });
      await api(t, `/api/servers/${a.id}`, { method: "DELETE" });
      const waiting = await queueDeploy(t, appFolder());
      await new Promise((r) => setTimeout(r, 3000));
      expect(await row(waiting)).toMatchObject({ status: "queued", claimedBy: null });
      expect((await api<{ waitingFor: string | null }>(t, `/api/deployments/${waiting}`)).waitingFor).toBe("all_draining");
      await api(t, `/api/deployments/${waiting}/cancel`, { method: "POST" });

      // Deleted: the token is refused at once; the runner stops its apps and exits 1.
      await api(t, `/api/servers/${b.id}`, { method: "DELETE" });
      const refused = await fetch(`${server.url}/api/runner/heartbeat`, {
        method: "POST",
        headers: { authorization: `Bearer ${b.token}`, "content-type": "application/json" },
        body: "{}",
      });
      expect(refused.status).toBe(401);
      expect(await second.exited).toBe(1);
      expect(second.out()).toContain("the server was deleted");
      await untilNoProcessOf(id);
    } finally {
      second.child.kill("SIGKILL");
    }
  });
});
