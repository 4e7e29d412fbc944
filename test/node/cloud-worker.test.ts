/**
 * The cloud topology for the self-hosted ↔ cloud tests (test/support/cloud-worker.ts):
 * the real Worker in workerd over HTTP on loopback, its own Postgres database through
 * the Neon driver, presigned folder uploads on the run's S3 server, its own keyring.
 */
import { readdirSync, readFileSync } from "node:fs";
import { eq } from "drizzle-orm";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { createKeyring } from "../../shared/crypto/keyring";
import { uploadSessions } from "../../shared/db/schema";
import { ScanResultSchema, UploadTargetSchema } from "../../functions/projects/folder/schema";
import { ProjectSchema } from "../../functions/projects/schema";
import { CLOUD_SECRET_KEYS, CLOUD_SHARED_DOMAIN, startCloudWorker, useCloudWorker } from "../support/cloud-worker";
import { expectBody, expectStatus } from "../support/harness";
import { tgz } from "../support/tar-fixtures";
import { TEST_SECRET_KEYS } from "../support/test-keys";
import { getWithHost } from "../support/wsp-runner";

/** Pids of this process's children whose command is workerd (Miniflare's runtime). */
function workerdChildren(): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid …: comm may hold spaces, so split after its closing parenthesis.
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && comm.startsWith("workerd")) found.push(Number(name));
    } catch {
      // Exited meanwhile.
    }
  }
  return found;
}

describe("the cloud Worker over HTTP", () => {
  const cloud = useCloudWorker();

  it("starts on loopback with its own database and keyring, and reports its start-up", () => {
    expect(cloud.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(cloud.databaseUrl).toMatch(/\/cloud_/);
    expect(cloud.secretKeys).toBe(CLOUD_SECRET_KEYS);
    expect(cloud.secretKeys).not.toBe(TEST_SECRET_KEYS);
    expect(cloud.sharedDomain).toBe(CLOUD_SHARED_DOMAIN);
    console.info(`cloud worker start-up: ${JSON.stringify(cloud.startup)}`);
  });

  it("serves the console's files on the API's host, with their _headers, and its own routes beside them; an app's name is never answered with them", async () => {
    const page = await fetch(`${cloud.url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<!doctype html>");
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    const script = await fetch(`${cloud.url}/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/javascript/);
    await script.arrayBuffer();
    expect((await fetch(`${cloud.url}/healthz`)).status).toBe(200);
    // Assets are matched by path alone: the Worker runs first so that an app's `/` is the app's (here: nothing deployed).
    const app = await getWithHost(`${cloud.url}/`, `nothing-deployed.${CLOUD_SHARED_DOMAIN}`);
    expect(app.status).toBe(404);
    expect(app.headers["x-workspace-edge"]).toBe("unknown_host");
  });

  it("answers an owner's token seeded in its database: /api/me, then a project created and read back", async () => {
    const owner = await cloud.seedTenant();
    const me = await expectStatus<{ user: { id: string }; organizations: Array<{ id: string }> }>(await cloud.request("/api/me", { token: owner.token }), 200);
    expect(me.user.id).toBe(owner.userId);
    expect(me.organizations.map((o) => o.id)).toContain(owner.orgId);

    const created = await expectBody(await cloud.request("/api/projects", { token: owner.token, json: { name: "Cloud smoke" } }), 201, ProjectSchema);
    const read = await expectBody(await cloud.request(`/api/projects/${created.id}`, { token: owner.token }), 200, ProjectSchema);
    expect(read.id).toBe(created.id);
    expect(read.name).toBe("Cloud smoke");

    // Another organization's member does not see it: the cloud's own authorization is in force.
    const stranger = await cloud.seedTenant();
    expect((await cloud.request(`/api/projects/${created.id}`, { token: stranger.token })).status).toBe(404);
  });

  it("opens a presigned folder-upload session whose URL takes the tarball, and scans it from the bucket", async () => {
    const owner = await cloud.seedTenant();
    const bytes = await tgz({ "package.json": JSON.stringify({ name: "smoke", scripts: { build: "echo ok", start: "node index.js" } }), "index.js": "1\n" });
    const target = await expectBody(
      await cloud.request("/api/projects/folder/session", { token: owner.token, json: { name: "smoke", sizeBytes: bytes.length } }),
      201,
      UploadTargetSchema,
    );
    expect(target.requiresAuth).toBe(false);
    expect(target.method).toBe("PUT");
    expect(new URL(target.absoluteUrl).origin).toBe(cloud.bindings.S3_ENDPOINT);

    // The storage checks the signature for real: the Worker signed with the cloud's S3 credentials.
    const put = await fetch(target.absoluteUrl, { method: target.method, headers: target.headers, body: bytes as Uint8Array<ArrayBuffer> });
    expect(put.status, await put.text()).toBe(200);
    const [row] = await cloud.db.select().from(uploadSessions).where(eq(uploadSessions.id, target.sessionId));
    expect(row?.orgId).toBe(owner.orgId);

    // The scan reads the object back from the bucket inside the Worker.
    const scan = await expectBody(
      await cloud.request(`/api/projects/folder/scan/${target.sessionId}`, { method: "POST", token: owner.token }),
      200,
      ScanResultSchema,
    );
    expect(JSON.stringify(scan)).toContain("npm");
  });

  it("runs the cron handler on demand (delivery drain, upload sweep, log retention)", async () => {
    const before = cloud.logs.length;
    await cloud.scheduled();
    expect(cloud.logs.slice(before).filter((line) => line.startsWith("[error]"))).toEqual([]);
  });

  it("keeps the Worker's log lines, and no token in them", async () => {
    const owner = await cloud.seedTenant();
    await cloud.request("/api/me", { token: owner.token });
    expect(cloud.logs.some((line) => line.includes('"path":"/api/me"'))).toBe(true);
    expect(cloud.logs.join("\n")).not.toContain(owner.token);
  });
});

describe("stopping the cloud Worker", () => {
  it("ends workerd, frees the port and drops the database", async () => {
    const cloud = await startCloudWorker();
    const keyring = await createKeyring(CLOUD_SECRET_KEYS);
    expect(keyring.activeKeyId).toBe(cloud.keyring.activeKeyId);
    expect(workerdChildren().length).toBeGreaterThan(0);
    expect((await fetch(`${cloud.url}/api/me`)).status).toBe(401);

    await cloud.stop();
    await cloud.stop();
    expect(workerdChildren()).toEqual([]);
    await expect(fetch(`${cloud.url}/api/me`)).rejects.toThrow();
    const server = new pg.Client({ connectionString: inject("pgUrl") });
    await server.connect();
    try {
      const name = new URL(cloud.databaseUrl).pathname.slice(1);
      expect((await server.query("select 1 from pg_database where datname = $1", [name])).rowCount).toBe(0);
    } finally {
      await server.end();
    }
  });
});
