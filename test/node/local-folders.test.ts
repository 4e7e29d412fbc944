/**
 * Local-folder projects (self-hosted, LOCAL_ROOTS) against a real Node adapter
 * (createNodeServices over a Postgres database of the suite's own): the path
 * rules on a temp tree with symbolic links (inside a root, and leading out), a
 * file, `..`, a missing path, a second root; scans of a Node app and of a
 * compose folder (values masked); import then list (exists, then not after the
 * folder is removed); 409 without LOCAL_ROOTS; the routes not shadowed by
 * /api/projects/{id}; and a local project deployed end to end with the runner
 * ON: ready, answering on its port, `.gitignore`d files and links absent.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeploymentSchema } from "../../functions/deployments/schema";
import { useCleanups } from "../support/cleanups";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../support/harness";
import { runnerClient } from "../support/runner-client";
import { FIXTURE_APP, type RunnerServer, runnerFixture, startRunnerServer } from "../support/runner-harness";
import type { GitTestServer } from "../support/git-server";

useCleanups("ws-local-");

let fixture: Awaited<ReturnType<typeof runnerFixture>>;
let server: RunnerServer;
let off: RunnerServer;
let rootA: string;
let rootB: string;
let outside: string;
const keep: string[] = [];

const SECRET = "compose-secret-value-7f3a";

beforeAll(async () => {
  fixture = await runnerFixture("ws_local_folders");
  const mk = (p: string) => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), p)));
    keep.push(dir);
    return dir;
  };
  rootA = mk("ws-local-a-");
  rootB = mk("ws-local-b-");
  outside = mk("ws-local-out-");
  // rootA/app: a Node app; rootA/compose: a compose folder; a file; links in and out.
  mkdirSync(join(rootA, "app"));
  writeFileSync(join(rootA, "app", "package.json"), JSON.stringify({ name: "a", scripts: { start: "node server.js" }, dependencies: { express: "^4" } }));
  writeFileSync(join(rootA, "app", "package-lock.json"), "{}");
  writeFileSync(join(rootA, "app", "server.js"), "");
  mkdirSync(join(rootA, "compose"));
  writeFileSync(
    join(rootA, "compose", "compose.yaml"),
    `services:\n  web:\n    image: nginx:1.27\n    ports:\n      - "8080:80"\n    environment:\n      API_KEY: ${SECRET}\n`,
  );
  writeFileSync(join(rootA, "file.txt"), "not a folder");
  symlinkSync(join(rootA, "app"), join(rootA, "link-in"));
  mkdirSync(join(outside, "secret"));
  writeFileSync(join(outside, "secret", "package.json"), JSON.stringify({ name: "outside" }));
  symlinkSync(join(outside, "secret"), join(rootA, "link-out"));
  mkdirSync(join(rootB, "site"));
  writeFileSync(join(rootB, "site", "index.html"), "<h1>hi</h1>");
  const common = { databaseUrl: fixture.db.url, gitUrl: "http://127.0.0.1:9" };
  server = await startRunnerServer({ ...common, dataDir: fixture.dataDir, env: { LOCAL_ROOTS: `${rootA}, ${rootB}` } });
  off = await startRunnerServer({ ...common, dataDir: join(fixture.dataDir, "off"), runner: { enabled: false } });
}, 60_000);

afterAll(async () => {
  await server?.close();
  await off?.close();
  await fixture?.drop();
  for (const dir of keep) rmSync(dir, { recursive: true, force: true });
});

const call = (h: RunnerServer, t: Member, path: string, json?: unknown) =>
  h.request(path, { method: json === undefined ? "GET" : "POST", token: t.token, org: t.orgId, json });

describe("local folders", () => {
  it("refuses paths outside the roots, '..', links leading out, files, missing and relative paths with 400 naming path", async () => {
    const t = await seedTenant(server);
    for (const path of [
      outside,
      join(outside, "secret"),
      `${rootA}/app/../app`,
      `${rootA}/..`,
      join(rootA, "link-out"),
      join(rootA, "link-out", "."),
      join(rootA, "file.txt"),
      join(rootA, "nope"),
      "app",
      "/",
    ]) {
      for (const route of ["/api/projects/scan", "/api/projects/import"]) {
        const p = await expectProblem(await call(server, t, route, { path }), 400, "path");
        expect(p.detail).toContain(path);
      }
    }
    // Nothing was recorded.
    const list = await expectStatus<{ items: unknown[] }>(await call(server, t, "/api/projects/local"), 200);
    expect(list.items).toEqual([]);
  });

  it("scans a Node app (also through a link inside the root), a compose folder with masked values, and a folder of a second root", async () => {
    const t = await seedTenant(server);
    const node = await expectStatus<Record<string, unknown>>(await call(server, t, "/api/projects/scan", { path: join(rootA, "app") }), 200);
    expect(node).toMatchObject({
      path: join(rootA, "app"),
      stack: "node",
      framework: "express",
      packageManager: "npm",
      installCommand: "npm ci",
      startCommand: "npm start",
      composeFile: null,
      truncated: false,
      files: 3,
    });
    const viaLink = await expectStatus<Record<string, unknown>>(await call(server, t, "/api/projects/scan", { path: join(rootA, "link-in") }), 200);
    expect(viaLink.path).toBe(join(rootA, "app"));

    const res = await call(server, t, "/api/projects/scan", { path: join(rootA, "compose") });
    const text = await res.clone().text();
    expect(res.status).toBe(200);
    expect(text).not.toContain(SECRET);
    const compose = JSON.parse(text);
    expect(compose).toMatchObject({ stack: "compose", composeFile: "compose.yaml" });
    expect(compose.services).toEqual([expect.objectContaining({ name: "web", image: "nginx:1.27", environment: { API_KEY: "••••••••" } })]);

    const site = await expectStatus<Record<string, unknown>>(await call(server, t, "/api/projects/scan", { path: join(rootB, "site") }), 200);
    expect(site).toMatchObject({ stack: "static", path: join(rootB, "site") });
  });

  it("caps the walk: a folder with 100,000 files answers quickly with truncated: true", async () => {
    const t = await seedTenant(server);
    const big = join(rootA, "big");
    mkdirSync(big);
    writeFileSync(join(big, "package.json"), JSON.stringify({ name: "big", scripts: { start: "node x.js" } }));
    const many = join(big, "many");
    mkdirSync(many);
    for (let i = 0; i < 100_000; i++) writeFileSync(join(many, `f${i}`), "");
    const started = performance.now();
    const scan = await expectStatus<Record<string, unknown>>(await call(server, t, "/api/projects/scan", { path: big }), 200);
    const ms = performance.now() - started;
    expect(scan).toMatchObject({ stack: "node", truncated: true, entries: 20_000 });
    expect(ms).toBeLessThan(5000);
    console.log(`scan of 100,000 files: ${Math.round(ms)} ms`);
    rmSync(big, { recursive: true, force: true });
  }, 120_000);

  it("imports, lists with exists, is not shadowed by /api/projects/{id}, and reports a removed folder", async () => {
    const t = await seedTenant(server);
    const dir = join(rootB, `proj-${Date.now()}`);
    cpSync(join(rootA, "app"), dir, { recursive: true });
    const p = await expectStatus<{ id: string; name: string; localPath: string; status: string }>(
      await call(server, t, "/api/projects/import", { path: dir, framework: "express" }),
      201,
    );
    expect(p).toMatchObject({ localPath: dir, name: dir.split("/").pop(), status: "created", framework: "express" });
    // GET /api/projects/{id} still reads a real project, and names the folder as its source (so does /info); /local reaches the list.
    const read = await expectStatus(await call(server, t, `/api/projects/${p.id}`), 200);
    expect(read.source).toEqual({ kind: "local", repository: null, localPath: dir });
    const info = await expectStatus(await call(server, t, `/api/projects/${p.id}/info`), 200);
    expect(info.source).toMatchObject({ kind: "local", localPath: dir, repositoryUrl: null });
    const list = await expectStatus<{ items: Array<Record<string, unknown>> }>(await call(server, t, "/api/projects/local"), 200);
    expect(list.items).toEqual([expect.objectContaining({ id: p.id, localPath: dir, exists: true })]);
    // Another organization sees none of it.
    const other = await seedTenant(server);
    expect((await expectStatus<{ items: unknown[] }>(await call(server, other, "/api/projects/local"), 200)).items).toEqual([]);

    rmSync(dir, { recursive: true, force: true });
    const after = await expectStatus<{ items: Array<Record<string, unknown>> }>(await call(server, t, "/api/projects/local"), 200);
    expect(after.items).toEqual([expect.objectContaining({ id: p.id, exists: false })]);
    const gone = await expectProblem(await call(server, t, "/api/deployments", { projectId: p.id }), 409);
    expect(gone.detail).toContain(`${dir} no longer exists`);
  });

  it("needs project:write to scan and import, project:read to list", async () => {
    const owner = await seedTenant(server);
    const reader = await seedTenant(server, { scopes: ["project:read"] });
    await expectProblem(await call(server, reader, "/api/projects/scan", { path: join(rootA, "app") }), 403);
    await expectProblem(await call(server, reader, "/api/projects/import", { path: join(rootA, "app") }), 403);
    await expectStatus(await call(server, reader, "/api/projects/local"), 200);
    const none = await seedTenant(server, { scopes: ["project:list"] });
    await expectProblem(await call(server, none, "/api/projects/local"), 403);
    void owner;
  });

  it("answers 409 naming LOCAL_ROOTS when no roots are configured", async () => {
    const t = await seedTenant(off);
    for (const [path, json] of [
      ["/api/projects/scan", { path: join(rootA, "app") }],
      ["/api/projects/import", { path: join(rootA, "app") }],
      ["/api/projects/local", undefined],
    ] as const) {
      const p = await expectProblem(await call(off, t, path, json), 409);
      expect(p.detail).toContain("LOCAL_ROOTS");
    }
  });

  it("deploys a local project end to end: snapshot honouring .gitignore, no links, ready and answering", async () => {
    const t = await seedTenant(server);
    const dir = join(rootA, `deploy-${Date.now()}`);
    cpSync(FIXTURE_APP, dir, { recursive: true });
    writeFileSync(join(dir, ".gitignore"), "secret.txt\nignored-dir/\n");
    writeFileSync(join(dir, "secret.txt"), "do not ship");
    mkdirSync(join(dir, "ignored-dir"));
    writeFileSync(join(dir, "ignored-dir", "x.js"), "");
    writeFileSync(join(dir, ".dockerignore"), "docker-only.txt\n");
    writeFileSync(join(dir, "docker-only.txt"), "");
    symlinkSync(join(outside, "secret"), join(dir, "out-link"));
    const p = await expectStatus<{ id: string }>(await call(server, t, "/api/projects/import", { path: dir }), 201);
    const client = runnerClient(
      () => server,
      () => ({}) as GitTestServer,
    );
    const d = await expectBody(await call(server, t, "/api/deployments", { projectId: p.id }), 201, DeploymentSchema);
    expect(d.source).toBe("local");
    // Files changed after queueing are not in this deployment: the snapshot was taken when queued.
    writeFileSync(join(dir, "late.txt"), "late");
    const ready = await client.waitFor(t, d.id, ["ready", "failed"]);
    expect(ready.failureReason ?? null).toBeNull();
    expect(ready.status).toBe("ready");
    const port = await client.currentPort(p.id);
    expect(port).toBeGreaterThan(0);
    expect((await client.askApp(port!)).version).toBe("1");
    const row = await client.row(d.id);
    expect(row.artifactKey).toBe(`artifacts/${t.orgId}/${d.id}.tar.gz`);
    const src = join(server.dataDir, "deployments", d.id, "src");
    expect(existsSync(join(src, "server.js"))).toBe(true);
    for (const absent of ["secret.txt", "ignored-dir", "docker-only.txt", "out-link", "late.txt"]) expect(existsSync(join(src, absent))).toBe(false);
    expect(existsSync(join(src, ".gitignore"))).toBe(true);
  }, 90_000);
});
