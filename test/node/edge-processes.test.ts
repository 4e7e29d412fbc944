/**
 * The edge in two real adapter processes (`node functions/start.mjs`, as `npm
 * start` runs it) sharing one Postgres: a rate limit is exact across both under
 * 200 concurrent requests, and a change made through one process's API reaches
 * the other process's edge within a second.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { newId } from "../../shared/ids";
import { type FreshDatabase, freshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const TOKEN = "edge-processes-owner-token-0123456789abcdef0123";
const SHARED = "apps.test";

interface Adapter {
  child: ChildProcess;
  url: string;
  port: number;
  output: () => string;
}

let db: FreshDatabase;
let client: pg.Client;
const dirs: string[] = [];
const adapters: Adapter[] = [];
let app: ReturnType<typeof createServer>;
let appPort: number;

/** Starts `node functions/start.mjs` on a free port with its own DATA_DIR; resolves once it prints where it listens. */
async function launch(): Promise<Adapter> {
  const dir = mkdtempSync(join(tmpdir(), "edge-proc-"));
  dirs.push(dir);
  const child = spawn(process.execPath, ["functions/start.mjs"], {
    env: {
      ...process.env,
      DATA_DIR: dir,
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: db.url,
      SECRET_KEYS: TEST_SECRET_KEYS,
      WORKSPACE_OWNER_TOKEN: TOKEN,
      RUNNER: "off",
      SHARED_DOMAIN: SHARED,
      LOG_LEVEL: "silent",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => {
    out += d;
  });
  child.stderr!.on("data", (d) => {
    out += d;
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    const m = /listening on (http:\/\/[^\s]+)/.exec(out);
    if (m) {
      const adapter = { child, url: m[1]!, port: Number(new URL(m[1]!).port), output: () => out };
      adapters.push(adapter);
      return adapter;
    }
    if (child.exitCode !== null) throw new Error(`adapter exited ${child.exitCode}: ${out}`);
    if (Date.now() > deadline) throw new Error(`adapter did not start: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function api<T>(a: Adapter, method: string, path: string, json?: unknown, expected = 200): Promise<T> {
  const res = await fetch(`${a.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(json ? { "content-type": "application/json" } : {}) },
    body: json ? JSON.stringify(json) : undefined,
  });
  const body = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${body}`);
  return (body ? JSON.parse(body) : undefined) as T;
}

/** A request to an adapter's port with an app's Host (a fresh connection each: no pooling between processes). */
function viaEdge(port: number, host: string, path = "/") {
  return new Promise<{ status: number; edge?: string; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers: { host }, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode!, edge: res.headers["x-workspace-edge"] as string | undefined, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (await check().catch(() => false)) return performance.now() - start;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`not within ${ms} ms`);
}

describe.runIf(inject("pgKind") === "postgres")("edge across two adapter processes on one Postgres", () => {
  let a: Adapter;
  let b: Adapter;

  beforeAll(async () => {
    db = await freshDatabase(inject("pgUrl"), "edge_proc", { migrate: true });
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    app = createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "x-app": "loopback" });
      res.end(`app ${req.url}`);
    });
    await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
    appPort = (app.address() as AddressInfo).port;
    // One after the other: the first builds the bundle if stale and creates the owner; the second finds both.
    a = await launch();
    b = await launch();
  }, 180_000);

  afterAll(async () => {
    for (const ad of adapters) {
      if (ad.child.exitCode === null) {
        const exited = new Promise((r) => ad.child.once("exit", r));
        ad.child.kill("SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (ad.child.exitCode === null) ad.child.kill("SIGKILL");
      }
    }
    await client?.end();
    await new Promise<void>((r) => (app ? app.close(() => r()) : r()));
    await db?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("a rate limit of 50 holds exactly under 200 concurrent requests split across both processes; a disable through A reaches B's edge within a second", async () => {
    const project = await api<{ id: string; slug: string }>(a, "POST", "/api/projects", { name: "Edge processes" }, 201);
    const host = `${project.slug}.${SHARED}`;
    // A current deployment pointing at the test's loopback app (the runner is off: nothing else starts or stops it).
    const env = await client.query<{ id: string; org_id: string }>("select id, org_id from environments where project_id = $1 and kind = 'production'", [
      project.id,
    ]);
    expect(env.rows).toHaveLength(1);
    await client.query(
      `insert into deployments (id, org_id, project_id, environment_id, status, current, port, served_by, source)
       values ($1, $2, $3, $4, 'ready', true, $5, 'test', 'git')`,
      [newId("dpl"), env.rows[0]!.org_id, project.id, env.rows[0]!.id, appPort],
    );
    await within(1000, async () => (await viaEdge(a.port, host)).status === 200 && (await viaEdge(b.port, host)).status === 200);

    await api(a, "POST", `/api/projects/${project.id}/route-rules`, { kind: "rate-limit", path: "/counted", limit: 50, windowSeconds: 300, by: "ip" }, 201);
    // A ban on /probe created after it: once both edges refuse /probe, both have reloaded the project, the rate limit included.
    await api(a, "POST", `/api/projects/${project.id}/route-rules`, { kind: "ban", path: "/probe", cidr: "127.0.0.1" }, 201);
    await within(1000, async () => {
      const [ra, rb] = await Promise.all([viaEdge(a.port, host, "/probe"), viaEdge(b.port, host, "/probe")]);
      return ra.edge === "banned" && rb.edge === "banned";
    });
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => viaEdge(i % 2 ? a.port : b.port, host, `/counted?i=${i}`)));
    const ok = answers.filter((r) => r.status === 200);
    const limited = answers.filter((r) => r.status === 429);
    expect(ok).toHaveLength(50);
    expect(limited).toHaveLength(150);
    expect(limited.every((r) => r.edge === "rate_limited")).toBe(true);
    expect(ok.every((r) => r.body.startsWith("app /counted"))).toBe(true);
    // Both processes answered some of the 200s and some of the 429s (the count is shared, not per process).
    const byPort = (port: number, status: number) => answers.filter((r, i) => (i % 2 ? a.port : b.port) === port && r.status === status).length;
    expect(byPort(a.port, 200) + byPort(b.port, 200)).toBe(50);
    expect(byPort(a.port, 429)).toBeGreaterThan(0);
    expect(byPort(b.port, 429)).toBeGreaterThan(0);

    // Disabled through A's API: B's edge answers 503 within a second.
    await api(a, "POST", `/api/projects/${project.id}/disable`);
    const took = await within(1000, async () => (await viaEdge(b.port, host)).edge === "disabled");
    expect(took).toBeLessThan(1000);
    // A hears the same notification (its own change comes back to it through Postgres like to B): within a second too.
    expect(await within(1000, async () => (await viaEdge(a.port, host)).status === 503)).toBeLessThan(1000);
  }, 120_000);
});
