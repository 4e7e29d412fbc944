/**
 * The self-hosted runner end to end for the other kinds of app (real processes,
 * real Postgres, the runner on):
 * - a static site (test/fixtures/apps/static-site: index.html, 404.html, an
 *   asset), detected or with `outputDirectory` set: served by the adapter on the
 *   recorded port (content types, the site's 404.html with 404), replaced by a
 *   second deploy and promoted back like an app;
 * - a compose project (test/fixtures/apps/compose-app) through the folder-upload
 *   flow (session → upload → scan → ensure → build/access, the values encrypted
 *   for the deployment as build/access writes them): a web service answering with
 *   its own service value, a worker whose lines are runtime logs of the
 *   deployment; an image-only service fails the deployment naming it;
 * - the app memory limit (test/fixtures/apps/memory-app): over the production
 *   resources' memoryMb it is killed (the kernel's, through its memory cgroup;
 *   the sampling watchdog where none is writable), the crash policy restarts it
 *   (or gives up when it keeps exceeding), with runtime `system` lines saying why.
 *
 * Apps run in the runner's sandbox: a fixture's `pid` is its pid namespace's
 * own (the same small number at every start), so "a new process" is a new
 * `instance` (a random id each fixture makes at start), and "no process is
 * left" is asked of the host by the deployment's cgroup (processesOf).
 */
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { ScanResultSchema } from "../../../functions/projects/folder/schema";
import { folderClient } from "../../support/folder-client";
import { dumpAllTables, expectStatus, type Member, seedTenant } from "../../support/harness";
import { processesOf, runnerClient } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";

const run = promisify(execFile);
const APPS = join(import.meta.dirname, "..", "..", "fixtures", "apps");

// Shorter restart delays than an operator's (1 s doubling to 30 s): an app given up after its five restarts in seconds.
const server = useRunnerServer({ prefix: "runner_kinds", runner: { restart: { baseDelayMs: 200, maxDelayMs: 800 } } });
const c = runnerClient(
  () => server,
  () => server.git,
);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(probe: () => Promise<T | undefined>, what: string, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** A fixture folder (plus `extra` files, paths relative to it) as a gzipped tarball under a top folder `app/`, at `under` inside it. */
async function tarballOf(fixtureName: string, extra: Record<string, string> = {}, under = ""): Promise<Uint8Array> {
  const dir = mkdtempSync(join(tmpdir(), "ws-kinds-"));
  try {
    const root = join(dir, "app", under);
    cpSync(join(APPS, fixtureName), root, { recursive: true });
    for (const [name, content] of Object.entries(extra)) writeFileSync(join(root, name), content);
    const { stdout } = await run("tar", ["-czf", "-", "-C", dir, "app"], { encoding: "buffer", maxBuffer: 64 * 1024 * 1024 });
    return new Uint8Array(stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const newProject = async (t: Member, name: string) => expectStatus<{ id: string }>(await c.call(t, "/api/projects", { json: { name } }), 201);

/** Runtime lines of the project through the API (GET /api/projects/:id/logs), newest last. */
async function runtimeLogs(t: Member, projectId: string, query = "") {
  const page = await expectStatus<{ items: Array<{ id: string; deploymentId: string | null; stream: string; message: string }> }>(
    await c.call(t, `/api/projects/${projectId}/logs?limit=500${query}`),
    200,
  );
  return page.items;
}

async function get(port: number, path: string) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
}

describe("runner: static sites", () => {
  it("serves a detected static site: ready and current, index.html, the asset, the site's 404.html; a second deploy replaces it; promote brings it back", async () => {
    const t = await seedTenant(server);
    const p = await newProject(t, "static site");
    const first = await c.waitFor(t, (await c.uploadDeployment(t, p.id, await tarballOf("static-site"))).id, ["ready", "failed"]);
    expect(first.failureReason).toBeNull();
    expect(first).toMatchObject({ status: "ready", current: true });
    expect(first.transitions.map((x) => x.status)).toEqual(["queued", "building", "deploying", "ready"]);
    expect((await expectStatus<{ status: string }>(await c.call(t, `/api/projects/${p.id}`), 200)).status).toBe("live");
    const buildText = (await c.logsOf(first.id)).map((l) => l.message).join("\n");
    expect(buildText).toContain("Detected static (static site)");
    expect(buildText).not.toMatch(/Running npm/);

    const port1 = (await c.currentPort(p.id))!;
    expect(port1).toBeGreaterThan(0);
    const home = await get(port1, "/");
    expect(home).toMatchObject({ status: 200, type: "text/html; charset=utf-8" });
    expect(home.body).toContain("static fixture home");
    expect(await get(port1, "/index.html")).toMatchObject({ status: 200, body: home.body });
    const css = await get(port1, "/assets/style.css");
    expect(css).toMatchObject({ status: 200, type: "text/css; charset=utf-8" });
    expect(css.body).toContain("rebeccapurple");
    const missing = await get(port1, "/no/such/page");
    expect(missing).toMatchObject({ status: 404, type: "text/html; charset=utf-8" });
    expect(missing.body).toContain("static fixture not found page");
    expect((await get(port1, "/../../etc/passwd")).status).toBe(404);

    // A second deploy (new content) replaces it: the new site answers on the new recorded port, the old server stops.
    const second = await c.waitFor(t, (await c.uploadDeployment(t, p.id, await tarballOf("static-site", { "index.html": "<h1>static fixture v2</h1>" }))).id, [
      "ready",
      "failed",
    ]);
    expect(second).toMatchObject({ status: "ready", current: true, failureReason: null });
    const port2 = (await c.currentPort(p.id))!;
    expect(port2).not.toBe(port1);
    expect((await get(port2, "/")).body).toContain("static fixture v2");
    expect((await c.read(t, first.id)).current).toBe(false);
    await until(
      async () =>
        await fetch(`http://127.0.0.1:${port1}/`).then(
          () => undefined,
          () => true,
        ),
      "the first site to stop",
    );

    // Promote the first back: served again from its kept output, no rebuild.
    await expectStatus(await c.call(t, `/api/deployments/${first.id}/promote`, { json: {} }), 200);
    const back = await until(async () => {
      const port = await c.currentPort(p.id);
      if (!port) return undefined;
      const page = await get(port, "/").catch(() => undefined);
      return page?.body.includes("static fixture home") ? port : undefined;
    }, "the promoted site to answer");
    expect((await get(back, "/nowhere")).status).toBe(404);
    expect((await c.read(t, first.id)).current).toBe(true);
    await until(
      async () =>
        await fetch(`http://127.0.0.1:${port2}/`).then(
          () => undefined,
          () => true,
        ),
      "the second site to stop",
    );
    expect((await c.logsOf(first.id)).filter((l) => l.message.startsWith("Unpacking"))).toHaveLength(1);
  });

  it("serves the outputDirectory set in the project options (a subfolder the detector would not pick)", async () => {
    const t = await seedTenant(server);
    const p = await newProject(t, "static out dir");
    await expectStatus(await c.call(t, `/api/projects/${p.id}/options`, { json: { outputDirectory: "public" } }), 200);
    const d = await c.waitFor(t, (await c.uploadDeployment(t, p.id, await tarballOf("static-site", {}, "public"))).id, ["ready", "failed"]);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    const port = (await c.currentPort(p.id))!;
    expect((await get(port, "/")).body).toContain("static fixture home");
    expect(await get(port, "/public/index.html")).toMatchObject({ status: 404 });
    expect((await get(port, "/missing")).body).toContain("static fixture not found page");
  });
});

describe("runner: compose projects (one process per service)", () => {
  const folder = () => folderClient(server);

  /** The CLI's folder-upload flow over HTTP: session → upload → scan → ensure (scan's services passed back) → build/access. */
  async function uploadFlow(t: Member, bytes: Uint8Array, projectId?: string) {
    const { target, result } = await folder().uploadAndScan(t, bytes);
    const ensured = await expectStatus<{ id: string }>(
      await folder().ensure(t, {
        name: "compose app",
        gitProvider: "upload",
        uploadSessionId: target.sessionId,
        ...(projectId ? { projectId } : {}),
        framework: result.framework,
        ...(result.services ? { services: result.services } : {}),
      }),
      projectId ? 200 : 201,
    );
    const access = await c.call(t, "/api/deployments/build/access", { json: { projectId: ensured.id, uploadSessionId: target.sessionId } });
    const body = await expectStatus<{ deployment: unknown }>(access, 201);
    return { projectId: ensured.id, deployment: DeploymentSchema.parse(body.deployment), scan: ScanResultSchema.parse(result) };
  }

  it("runs the web and the worker: ready, the web answers with its own service value, the worker's lines are the deployment's runtime logs", async () => {
    const t = await seedTenant(server);
    const { projectId, deployment, scan } = await uploadFlow(t, await tarballOf("compose-app"));
    expect(scan.stack).toBe("compose");
    expect(deployment.status).toBe("queued");
    const d = await c.waitFor(t, deployment.id, ["ready", "failed"]);
    expect(d.failureReason).toBeNull();
    expect(d).toMatchObject({ status: "ready", current: true });
    expect((d.services ?? []).map((s) => s.name).sort()).toEqual(["web", "worker"]);

    const port = (await c.currentPort(projectId))!;
    const answer = JSON.parse((await get(port, "/")).body) as { greeting: string | null; workerTag: string | null };
    // Its own service's value (decrypted by the runner from the deployment's services_ciphertext), not the worker's.
    expect(answer.greeting).toBe("compose-greeting-41d7");
    expect(answer.workerTag).toBeNull();

    const ticks = await until(async () => {
      const lines = (await runtimeLogs(t, projectId, `&deploymentId=${d.id}&q=worker%20tick`)).filter((l) => l.stream === "stdout");
      return lines.length >= 5 ? lines : undefined;
    }, "five worker lines");
    for (const l of ticks) expect(l.deploymentId).toBe(d.id);
    // The worker prints its own service value: masked like a secret in the stored line.
    expect(ticks[0]!.message).toMatch(/^worker tick \d+ ••••••••$/);
    const numbers = ticks.map((l) => Number(/worker tick (\d+)/.exec(l.message)![1]));
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    const all = await runtimeLogs(t, projectId, `&deploymentId=${d.id}`);
    expect(all.some((l) => l.stream === "stdout" && l.message === `web listening on ${port}`)).toBe(true);
    expect(all.some((l) => l.stream === "system" && /^Started worker \(pid \d+\)$/.test(l.message))).toBe(true);
    // The services' values are stored encrypted only.
    const dump = await dumpAllTables(server);
    expect(dump).not.toContain("compose-greeting-41d7");
    expect(dump).not.toContain("worker-tag-9b3e");
  });

  it("runs a service with a build context next to the compose file and a Dockerfile: its stack detected there, installed, built, started", async () => {
    const t = await seedTenant(server);
    const compose = ["services:", "  web:", "    build: .", "    ports:", '      - "8080"', "    environment:", "      GREETING: built-greeting-5e2a", ""].join(
      "\n",
    );
    const pkg = JSON.stringify({
      name: "compose-built",
      private: true,
      scripts: { build: "node -e \"require('fs').writeFileSync('built.txt', 'yes')\"", start: "node web.js" },
    });
    const { projectId, deployment } = await uploadFlow(
      t,
      await tarballOf("compose-app", { "compose.yaml": compose, "package.json": pkg, Dockerfile: 'FROM node:22\nCMD ["node", "web.js"]\n' }),
    );
    const d = await c.waitFor(t, deployment.id, ["ready", "failed"]);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    const text = (await c.logsOf(d.id)).map((l) => l.message).join("\n");
    expect(text).toMatch(/Running npm install/);
    expect(text).toMatch(/Running npm run build/);
    const answer = JSON.parse((await get((await c.currentPort(projectId))!, "/")).body) as { greeting: string };
    expect(answer.greeting).toBe("built-greeting-5e2a");
  });

  it("a server restart brings every service back, with its own values", { timeout: 60_000 }, async () => {
    const t = await seedTenant(server);
    const { projectId, deployment } = await uploadFlow(t, await tarballOf("compose-app"));
    const d = await c.waitFor(t, deployment.id, ["ready", "failed"]);
    expect(d.status).toBe("ready");
    const before = JSON.parse((await get((await c.currentPort(projectId))!, "/")).body) as { instance: string };
    const lastBefore = (await until(async () => (await runtimeLogs(t, projectId, `&deploymentId=${d.id}&q=worker%20tick`)).at(-1), "a worker line")).id;
    await server.close();
    expect(processesOf(d.id)).toEqual([]);
    await server.reopen();
    const after = await until(async () => {
      const port = await c.currentPort(projectId);
      const page = port ? await get(port, "/").catch(() => undefined) : undefined;
      const body = page?.status === 200 ? (JSON.parse(page.body) as { instance: string; greeting: string }) : undefined;
      return body && body.instance !== before.instance ? body : undefined;
    }, "the restored web service");
    expect(after.greeting).toBe("compose-greeting-41d7");
    // The worker runs again: new lines after the restart, its value masked as before.
    const fresh = await until(async () => {
      const lines = (await runtimeLogs(t, projectId, `&deploymentId=${d.id}&q=worker%20tick`)).filter((l) => BigInt(l.id) > BigInt(lastBefore));
      return lines.length >= 3 ? lines : undefined;
    }, "worker lines after the restart");
    expect(fresh[0]!.message).toMatch(/^worker tick \d+ ••••••••$/);
    expect((await c.read(t, d.id)).status).toBe("ready");
  });

  it("fails a deployment with an image-only service, naming the service", async () => {
    const t = await seedTenant(server);
    const compose = ["services:", "  web:", "    command: node web.js", "    ports:", '      - "8080"', "  cache:", "    image: redis:7", ""].join("\n");
    const { projectId, deployment } = await uploadFlow(t, await tarballOf("compose-app", { "compose.yaml": compose }));
    const d = await c.waitFor(t, deployment.id, ["ready", "failed"]);
    expect(d.status).toBe("failed");
    expect(d.failureReason).toContain("Service 'cache'");
    expect(d.failureReason).toContain("redis:7");
    expect(d.failureReason).toMatch(/container engine/);
    expect(d.transitions.map((x) => x.status)).toEqual(["queued", "building", "failed"]);
    expect(await c.currentPort(projectId)).toBeNull();
    expect((await c.eventsOnce(projectId, "build.failed")).length).toBe(1);
  });
});

describe("runner: the app memory limit", () => {
  async function memoryProject(t: Member, vars: Array<{ key: string; value: string }> = []) {
    const p = await newProject(t, "memory app");
    // npm itself holds ~50 MiB: the app is started directly, so its group is the app.
    await expectStatus(await c.call(t, `/api/projects/${p.id}/options`, { json: { startCommand: "node server.js" } }), 200);
    await expectStatus(await c.call(t, `/api/projects/${p.id}/resources`, { method: "PATCH", json: { production: { memoryMb: 128 } } }), 200);
    if (vars.length) await c.setVars(t, p.id, vars);
    return p;
  }

  it("kills an app over its memory limit and restarts it on the same port, saying why in system lines", { timeout: 90_000 }, async () => {
    const t = await seedTenant(server);
    const p = await memoryProject(t);
    const d = await c.waitFor(t, (await c.uploadDeployment(t, p.id, await tarballOf("memory-app"))).id, ["ready", "failed"]);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    const port = (await c.currentPort(p.id))!;
    const before = JSON.parse((await get(port, "/")).body) as { instance: string; rssMb: number };
    expect(before.rssMb).toBeLessThan(128);
    // The cgroup of this start (one per start of a process): nothing of it may outlive the kill.
    const groupsBefore = new Set(processesOf(d.id).map((x) => x.group));
    expect(groupsBefore.size).toBe(1);

    expect((await get(port, "/grow")).body).toBe("growing");
    const killed = await until(async () => {
      const lines = await runtimeLogs(t, p.id, `&deploymentId=${d.id}&stream=system`);
      return lines.some((l) => l.message.startsWith("Restarting web")) ? lines : undefined;
    }, "the restart line");
    const messages = killed.map((l) => l.message);
    expect(messages).toContain("web was killed: memory limit (128 MiB) exceeded");
    expect(messages.some((m) => /^Restarting web in .+ \(restart 1 of at most 5/.test(m))).toBe(true);
    expect(processesOf(d.id).filter((x) => groupsBefore.has(x.group))).toEqual([]);

    // Back on the same port (routing does not change), a new process, still the current deployment.
    const after = await until(async () => {
      const page = await get(port, "/").catch(() => undefined);
      if (page?.status !== 200) return undefined;
      const body = JSON.parse(page.body) as { instance: string };
      return body.instance !== before.instance ? body : undefined;
    }, "the restarted app");
    expect(after.instance).not.toBe(before.instance);
    // The app answers a moment before the runner records it up again (onUp after its health check).
    const row = await until(async () => {
      const r = await c.row(d.id);
      return r.port !== null ? r : undefined;
    }, "the port recorded again");
    expect(row).toMatchObject({ status: "ready", current: true, crashedAt: null, port });
  });

  it("gives up an app that keeps going over its limit: crashed, no port, service.crashed naming the memory limit", { timeout: 150_000 }, async () => {
    const t = await seedTenant(server);
    // Every start grows past the limit 1.5 s later (after answering: the launch succeeds).
    const p = await memoryProject(t, [{ key: "GROW_ON_START_MS", value: "1500" }]);
    const d = await c.waitFor(t, (await c.uploadDeployment(t, p.id, await tarballOf("memory-app"))).id, ["ready", "failed"]);
    expect(d.status).toBe("ready");
    let row = await c.row(d.id);
    const deadline = Date.now() + 140_000;
    while (!row.crashedAt && Date.now() < deadline) {
      await sleep(250);
      row = await c.row(d.id);
    }
    expect(row.crashedAt).not.toBeNull();
    expect(row.port).toBeNull();
    const messages = (await runtimeLogs(t, p.id, `&deploymentId=${d.id}&stream=system`)).map((l) => l.message);
    expect(messages.filter((m) => m === "web was killed: memory limit (128 MiB) exceeded").length).toBe(6);
    const gaveUp = messages.find((m) => m.startsWith("Gave up restarting"));
    expect(gaveUp).toBe("Gave up restarting: the app was killed: memory limit (128 MiB) exceeded; it crashed 6 times within 10 minutes");
    await sleep(300);
    const events = await c.eventsOnce(p.id, "service.crashed");
    expect(events).toHaveLength(1);
    expect(events[0]!.message).toContain("memory limit (128 MiB) exceeded");
  });
});
