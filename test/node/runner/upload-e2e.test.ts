/**
 * The folder-upload flow as a user runs it: the `wsp` command as a child process
 * (`node functions/cli/wsp.mjs deploy <folder> --api <url> --token <token>`)
 * against a real self-hosted server with its runner ON (Postgres of its own,
 * real processes): the small Node app of test/fixtures/apps/node-app (build and
 * start scripts, no dependencies) is packed, uploaded, scanned, ensured, queued
 * through build/access and built; the CLI prints the build log and exits 0 once
 * it is ready; the project is live; the app answers on the deployment's port and
 * through the edge on its free hostname; a second deploy of the folder reuses the
 * linked project and replaces the deployment; a failing build exits non-zero with
 * the reason; `wsp logs <project>` prints the app's runtime lines.
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LINK_FILE } from "../../../functions/cli/link";
import { loadNodeConfig } from "../../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../../functions/self-hosted/start";
import { openPostgres, type PostgresDatabase } from "../../../shared/db/postgres";
import { deployments, environments } from "../../../shared/db/schema";
import { useCleanups } from "../../support/cleanups";
import { freshDatabase } from "../../support/fresh-database";
import { type Harness, type Member, seedTenant } from "../../support/harness";
import { untilNoProcessOf } from "../../support/runner-client";
import { FIXTURE_APP } from "../../support/runner-harness";

const APPS = join(import.meta.dirname, "..", "..", "fixtures", "apps");

const { tempDir } = useCleanups("ws-upload-e2e-");
const SHARED = "apps.test";
const WSP = join(process.cwd(), "functions/cli/wsp.mjs");

let server: RunningServer;
let db: PostgresDatabase;
let dataDir: string;
let dropDatabase: () => Promise<void>;

beforeAll(async () => {
  const own = await freshDatabase(inject("pgUrl"), "ws_upload_e2e", { migrate: true });
  dropDatabase = () => own.drop();
  dataDir = mkdtempSync(join(tmpdir(), "ws-upload-e2e-data-"));
  server = await startSelfHosted(
    loadNodeConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
      DATA_DIR: dataDir,
      DATABASE_URL: own.url,
      SHARED_DOMAIN: SHARED,
      RUNNER: "on",
      BUILD_TIMEOUT: "60s",
      HEALTH_TIMEOUT: "20s",
      STOP_GRACE: "1s",
      // Tests that need the smoke window set their own.
      SMOKE_WINDOW: "0s",
    }),
    () => {},
  );
  db = await openPostgres(own.url, { migrate: false, max: 2 });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.close();
  await dropDatabase?.();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A tenant of its own per test: a user, an organization and a token for the CLI. */
const newTenant = () => seedTenant({ db: db.db } as unknown as Harness);

/** Runs `wsp <args>` as a command, to its end. */
function wsp(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [WSP, ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME } });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out, err })));
}

const deployArgs = (t: Member, dir: string) => ["deploy", dir, "--api", server.url, "--token", t.token];

const api = async <T = any>(t: Member, path: string, init: RequestInit = {}): Promise<T> => {
  const res = await fetch(`${server.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json", ...init.headers },
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
};

/** A fixture app (default: the Node app) copied to a folder of its own (plus `extra` files). */
function appFolder(extra: Record<string, string> = {}, from = FIXTURE_APP): string {
  const dir = tempDir("ws-upload-app-");
  cpSync(from, dir, { recursive: true });
  for (const [name, content] of Object.entries(extra)) writeFileSync(join(dir, name), content);
  return dir;
}

/** The port a deployment's app listens on (what the edge reads). */
async function portOf(deploymentId: string): Promise<number | null> {
  const [row] = await db.db.select({ port: deployments.port }).from(deployments).where(eq(deployments.id, deploymentId));
  return row?.port ?? null;
}

/** GET through the server's edge with a Host header. */
function viaEdge(host: string, path = "/"): Promise<{ status: number; body: string }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: Number(url.port), path, headers: { host } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("wsp deploy against a server with the runner on", () => {
  it("deploys a Node app folder: build lines printed, exit 0 when ready, live, answering; a second deploy reuses the project and replaces the deployment; wsp logs prints its lines", {
    timeout: 120_000,
  }, async () => {
    const t = await newTenant();
    const dir = appFolder();
    const first = await wsp(deployArgs(t, dir));
    expect(first.code, `${first.out}\n${first.err}`).toBe(0);
    // The build log, line by line, as the runner wrote it.
    expect(first.out).toContain("Unpacking the uploaded source");
    // Sizes read as a person says them (never "0.0 MiB" for a small folder).
    expect(first.out).toMatch(/\nUnpacked 3 files \(\d+(\.\d)? KB\)\n/);
    expect(first.out).toMatch(/Running npm run build\n/);
    expect(first.out).toContain("building the fixture app\n");
    expect(first.out).toContain("build done\n");
    expect(first.out).toMatch(/Ready: the app answers on port \d+\n/);
    const projectId = /Created project .* \((prj_[0-9a-z]+)\)/.exec(first.out)?.[1];
    expect(projectId, first.out).toBeDefined();
    const firstId = /Deployment (dpl_[0-9a-z]+) is ready/.exec(first.out)?.[1];
    expect(firstId, first.out).toBeDefined();
    expect(first.err).toMatch(/Detected Node\.js \(npm\)\n/);
    expect(first.out + first.err).not.toContain(t.token);
    expect(existsSync(join(dir, LINK_FILE))).toBe(true);

    const project = await api<{ status: string; routes: { free: { hostname: string } } }>(t, `/api/projects/${projectId}`);
    expect(project.status).toBe("live");
    const d1 = await api<{ status: string; current: boolean; source: string }>(t, `/api/deployments/${firstId}`);
    expect(d1).toMatchObject({ status: "ready", current: true, source: "upload" });
    const port1 = (await portOf(firstId!))!;
    // `instance`: the app's own id of its process (its pid is its sandbox's, the same small number every time).
    const answer1 = (await (await fetch(`http://127.0.0.1:${port1}/`)).json()) as { version: string; instance: string };
    expect(answer1.version).toBe("1");
    // The edge serves it on the project's free hostname.
    const edged = await viaEdge(project.routes.free.hostname);
    expect(edged.status).toBe(200);
    expect(JSON.parse(edged.body).instance).toBe(answer1.instance);

    // The same folder again: the link picks the same project; the new deployment replaces the first.
    writeFileSync(join(dir, "build.js"), readFileSync(join(dir, "build.js"), "utf8").replace("build done", "build done again"));
    const second = await wsp(deployArgs(t, dir));
    expect(second.code, `${second.out}\n${second.err}`).toBe(0);
    expect(second.err).toContain(`Deploying to project`);
    expect(second.err).toContain(`(${projectId}), linked in ${LINK_FILE}`);
    expect(second.out).toMatch(new RegExp(`^Updated project .* \\(${projectId}\\)`, "m"));
    expect(second.out).toContain("build done again\n");
    const secondId = /Deployment (dpl_[0-9a-z]+) is ready/.exec(second.out)?.[1];
    expect(secondId).toBeDefined();
    expect(secondId).not.toBe(firstId);
    const list = await api<{ items: Array<{ id: string }> }>(t, "/api/projects");
    expect(list.items.filter((p) => p.id === projectId)).toHaveLength(1);
    expect(list.items).toHaveLength(1);
    const deps = await api<{ items: Array<{ id: string; current: boolean; status: string }> }>(t, `/api/projects/${projectId}/deployments`);
    expect(deps.items.map((x) => [x.id, x.status, x.current]).sort()).toEqual(
      [
        [firstId, "ready", false],
        [secondId, "ready", true],
      ].sort(),
    );
    const port2 = (await portOf(secondId!))!;
    const answer2 = (await (await fetch(`http://127.0.0.1:${port2}/`)).json()) as { instance: string };
    expect(answer2.instance).not.toBe(answer1.instance);
    // No process of the first deployment is left on the host (found by its cgroup).
    expect(await untilNoProcessOf(firstId!, 10_000)).toEqual([]);
    expect(JSON.parse((await viaEdge(project.routes.free.hostname)).body).instance).toBe(answer2.instance);

    // wsp logs <project>: the app's runtime lines, newest last.
    const logs = await wsp(["logs", projectId!, "--api", server.url, "--token", t.token]);
    expect(logs.code, logs.err).toBe(0);
    const lines = logs.out.trim().split("\n");
    expect(lines.some((l) => l.endsWith(`listening on ${port2}`))).toBe(true);
    expect(lines.some((l) => l.endsWith(`listening on ${port1}`))).toBe(true);
    expect(lines.filter((l) => l.endsWith("starting version 1")).length).toBeGreaterThanOrEqual(2);
    expect(lines.findIndex((l) => l.endsWith(`listening on ${port1}`))).toBeLessThan(lines.findIndex((l) => l.endsWith(`listening on ${port2}`)));
    for (const l of lines) expect(l).toMatch(/^\d{4}-\d\d-\d\dT\S+Z /);
  });

  it("a folder whose build fails: the CLI prints the build's lines and exits non-zero with the reason", { timeout: 90_000 }, async () => {
    const t = await newTenant();
    const dir = appFolder({
      "build.js": "console.log('compiling');\nconsole.error('syntax error in app.ts');\nprocess.exit(2);\n",
    });
    const result = await wsp(deployArgs(t, dir));
    expect(result.code, `${result.out}\n${result.err}`).toBe(1);
    expect(result.out).toContain("compiling\n");
    expect(result.out).toContain("syntax error in app.ts\n");
    const id = /Queued deployment (dpl_[0-9a-z]+)/.exec(result.err)?.[1] ?? /Queued deployment (dpl_[0-9a-z]+)/.exec(result.out)?.[1];
    expect(id, `${result.out}\n${result.err}`).toBeDefined();
    expect(result.err).toContain(`Error: deployment ${id} failed: build failed (exit code 2): npm run build`);
    expect(result.err).toContain("syntax error in app.ts");
    const projectId = /\((prj_[0-9a-z]+)\)/.exec(result.out)![1]!;
    const project = await api<{ status: string }>(t, `/api/projects/${projectId}`);
    expect(project.status).not.toBe("live");
    const [row] = await db.db
      .select({ status: deployments.status, port: deployments.port })
      .from(deployments)
      .innerJoin(environments, eq(environments.id, deployments.environmentId))
      .where(and(eq(deployments.id, id!), eq(environments.name, "production")));
    expect(row).toEqual({ status: "failed", port: null });
  });

  it("deploys a static folder and a compose folder the same way: served on the deployment's port and through the edge", { timeout: 90_000 }, async () => {
    const t = await newTenant();
    const site = await wsp(deployArgs(t, appFolder({}, join(APPS, "static-site"))));
    expect(site.code, `${site.out}\n${site.err}`).toBe(0);
    expect(site.err).toContain("Detected static site\n");
    expect(site.out).toContain("Detected static (static site)\n");
    const siteId = /Deployment (dpl_[0-9a-z]+) is ready/.exec(site.out)![1]!;
    const siteProject = /Created project .* \((prj_[0-9a-z]+)\)/.exec(site.out)![1]!;
    const home = await fetch(`http://127.0.0.1:${await portOf(siteId)}/`);
    expect(home.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await home.text()).toContain("static fixture home");
    const { routes } = await api<{ routes: { free: { hostname: string } } }>(t, `/api/projects/${siteProject}`);
    const missing = await viaEdge(routes.free.hostname, "/nope");
    expect(missing.status).toBe(404);
    expect(missing.body).toContain("static fixture not found page");

    const compose = await wsp(deployArgs(t, appFolder({}, join(APPS, "compose-app"))));
    expect(compose.code, `${compose.out}\n${compose.err}`).toBe(0);
    expect(compose.err).toContain("Detected Docker Compose, 2 services\n");
    const composeId = /Deployment (dpl_[0-9a-z]+) is ready/.exec(compose.out)![1]!;
    // The value went through scan (masked), ensure (restored from the session) and build/access (encrypted for the deployment).
    const web = (await (await fetch(`http://127.0.0.1:${await portOf(composeId)}/`)).json()) as { greeting: string };
    expect(web.greeting).toBe("compose-greeting-41d7");
    expect(compose.out + compose.err).not.toContain("compose-greeting-41d7");
  });
});
