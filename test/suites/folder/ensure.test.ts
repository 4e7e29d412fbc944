/**
 * Folder-upload deploy on every runtime: the session and its target (the relay
 * on the Node adapter, presigned object storage on the Worker), uploads as a
 * client following the spec makes them, the scan, ensure, org scoping, and the
 * compose round trip (secrets restored, masks never stored, services removed).
 */
import { and, eq, gt } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { projectServices, uploadSessions } from "../../../shared/db/schema";
import { MAX_UPLOAD_BYTES, ORG_SESSION_CAPS } from "../../../shared/storage/limits";
import { folderClient } from "../../support/folder-client";
import { dumpAllTables, expectProblem, expectStatus, seedMember, seedTenant, type Member } from "../../support/harness";
import { tgz } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const MASK = "••••••••";

const NEXT_APP = {
  "package.json": JSON.stringify({ name: "web", scripts: { build: "next build", start: "next start" }, dependencies: { next: "15.0.0", react: "19.0.0" } }),
  "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
  "app/page.tsx": "export default function Page() { return null }\n",
};

/** Problem bodies compared byte for byte, without the per-request id. */
async function problemWithoutId(res: Response, status: number) {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  const { requestId, ...rest } = JSON.parse(text);
  expect(requestId).toMatch(/^req_/);
  return rest;
}

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: session", () => {
  it("opens a session without a body, with an empty body and with a hint (presigned targets need the size)", async () => {
    const t = await seedTenant(h);
    const hinted = await c.openSession(t, { name: "my-app", sizeBytes: 1234 });
    const targets = [hinted];
    if (c.presigned()) {
      await expectProblem(await h.request("/api/projects/folder/session", { method: "POST", token: t.token }), 400, "sizeBytes");
      await expectProblem(await h.request("/api/projects/folder/session", { token: t.token, json: {} }), 400, "sizeBytes");
    } else {
      targets.push(await c.openSession(t), await c.openSession(t, {}));
    }
    for (const target of targets) {
      expect(target.sessionId).toMatch(/^ups_/);
      expect(target.headers["Content-Type"]).toBe("application/gzip");
      expect(target.maxBytes).toBe(MAX_UPLOAD_BYTES);
      expect(new Date(target.expiresAt).getTime()).toBeGreaterThan(Date.now() + 50 * 60_000);
      expect(new URL(target.url, target.absoluteUrl).toString()).toBe(target.absoluteUrl);
      if (target.requiresAuth) {
        // The relay: a path under the API base, the same bearer token.
        expect(target.method).toBe("POST");
        expect(target.url).toBe(`/api/projects/folder/upload/${target.sessionId}`);
        expect(target.absoluteUrl.endsWith(target.url)).toBe(true);
      } else {
        // Presigned object storage: an absolute URL carrying its own credential, under the organization's prefix.
        expect(target.method).toBe("PUT");
        expect(target.url).toBe(target.absoluteUrl);
        const url = new URL(target.absoluteUrl);
        expect(url.pathname).toContain(`/${t.orgId}/${target.sessionId}.tar.gz`);
        expect(url.searchParams.get("X-Amz-Signature")).toMatch(/^[0-9a-f]{64}$/);
        expect(Number(url.searchParams.get("X-Amz-Expires"))).toBeLessThanOrEqual(15 * 60);
        expect(url.searchParams.get("X-Amz-SignedHeaders")!.split(";")).toEqual(expect.arrayContaining(["content-type", "content-length"]));
      }
    }
    expect(hinted.requiresAuth || hinted.headers["Content-Length"] === "1234").toBe(true);
    const row = await c.sessionRow(hinted.sessionId);
    expect(row).toMatchObject({ orgId: t.orgId, createdBy: t.userId, hintName: "my-app", hintSizeBytes: 1234, uploadedAt: null, scan: null });
  });

  it("refuses an invalid hint, naming the field", async () => {
    const t = await seedTenant(h);
    const post = (json: unknown) => h.request("/api/projects/folder/session", { token: t.token, json });
    await expectProblem(await post({ sizeBytes: MAX_UPLOAD_BYTES + 1 }), 400, "sizeBytes");
    await expectProblem(await post({ sizeBytes: 0 }), 400, "sizeBytes");
    await expectProblem(await post({ sizeBytes: "12" }), 400, "sizeBytes");
    await expectProblem(await post({ name: "" }), 400, "name");
    await expectProblem(await post({ bucket: "other" }), 400, "bucket");
    await expectProblem(await post([1]), 400);
    const raw = await h.request("/api/projects/folder/session", { token: t.token, method: "POST", body: "name=x", headers: { "content-type": "text/plain" } });
    await expectProblem(raw, 400);
  });

  it("presigned: a session without sizeBytes is a 400 naming it, and nothing is opened", async (ctx) => {
    if (!c.presigned()) ctx.skip();
    const t = await seedTenant(h);
    for (const hint of [undefined, {}, { name: "no-size" }]) {
      const res = await h.request("/api/projects/folder/session", { token: t.token, ...(hint ? { json: hint } : { method: "POST" }) });
      const p = await expectProblem(res, 400, "sizeBytes");
      expect(p.detail).toMatch(/sizeBytes is required/);
    }
    expect(await h.db.select().from(uploadSessions).where(eq(uploadSessions.orgId, t.orgId))).toHaveLength(0);
  });

  it("needs project:write", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectProblem(await h.request("/api/projects/folder/session", { method: "POST", token: viewer.token }), 403);
    await expectProblem(await h.request("/api/projects/folder/session", { method: "POST" }), 401);
  });
});

describe("folder upload: upload, scan and ensure", () => {
  it("runs session → upload → scan → ensure for a Next.js folder", async () => {
    const t = await seedTenant(h);
    const { target, result } = await c.uploadAndScan(t, await tgz(NEXT_APP));
    expect(result).toMatchObject({
      sessionId: target.sessionId,
      stack: "node",
      framework: "nextjs",
      packageManager: "pnpm",
      installCommand: "pnpm install --frozen-lockfile",
      buildCommand: "pnpm run build",
      startCommand: "pnpm start",
      outputDirectory: ".next",
      dockerfile: null,
      composeFile: null,
      rootDirectory: null,
      files: 3,
    });
    expect(result.services).toBeUndefined();

    const res = await c.ensure(t, {
      name: "Web",
      gitProvider: "upload",
      uploadSessionId: target.sessionId,
      framework: result.framework,
      buildCommand: result.buildCommand,
      installCommand: result.installCommand,
      startCommand: result.startCommand,
      outputDirectory: result.outputDirectory,
    });
    const project = await expectStatus(res, 201);
    expect(project).toMatchObject({
      name: "Web",
      gitProvider: "upload",
      framework: "nextjs",
      buildCommand: "pnpm run build",
      status: "created",
      services: [],
      uploadSessionId: target.sessionId,
    });
    const info = await expectStatus(await h.request(`/api/projects/${project.id}/options`, { token: t.token, json: {} }), 200);
    expect(info).toMatchObject({
      installCommand: "pnpm install --frozen-lockfile",
      startCommand: "pnpm start",
      outputDirectory: ".next",
      buildCommand: "pnpm run build",
    });
    const session = await c.sessionRow(target.sessionId);
    expect(session?.projectId).toBe(project.id);
    expect(session!.expiresAt.getTime()).toBeGreaterThan(Date.now() + 55 * 60_000);
  });

  it("scans the contents of a single top-level folder", async () => {
    const t = await seedTenant(h);
    const { result } = await c.uploadAndScan(t, await tgz({ "site/index.html": "<h1>hi</h1>", "site/style.css": "h1{}" }));
    expect(result).toMatchObject({ stack: "static", framework: "static", outputDirectory: ".", rootDirectory: "site", files: 2 });
  });

  it("uploading again replaces the tarball", async () => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    await c.upload(t, target, await tgz({ "go.mod": "module example.com/app\n\nrequire github.com/gin-gonic/gin v1.10.0\n" }));
    expect(await expectStatus(await c.scan(t, target.sessionId), 200)).toMatchObject({ stack: "go", framework: "gin" });
    await c.upload(t, target, await tgz({ Gemfile: "source 'https://rubygems.org'\ngem 'rails', '~> 7.1'\n" }));
    expect(await expectStatus(await c.scan(t, target.sessionId), 200)).toMatchObject({ stack: "ruby", framework: "rails" });
  });

  it("ensure updates a project in place, and a retried ensure with the same session creates no duplicate", async () => {
    const t = await seedTenant(h);
    const { target } = await c.uploadAndScan(t, await tgz(NEXT_APP));
    const first = await expectStatus(await c.ensure(t, { name: "One", uploadSessionId: target.sessionId }), 201);
    expect(first.gitProvider).toBe("upload");
    const retry = await expectStatus(await c.ensure(t, { name: "One again", uploadSessionId: target.sessionId }), 200);
    expect(retry.id).toBe(first.id);
    expect(retry.name).toBe("One again");
    expect(await c.projectCount(t.orgId)).toBe(1);

    const other = await expectStatus(await h.request("/api/projects", { token: t.token, json: { name: "Other" } }), 201);
    await expectProblem(await c.ensure(t, { name: "x", projectId: other.id, uploadSessionId: target.sessionId }), 409);

    const updated = await expectStatus(
      await c.ensure(t, { name: "Other renamed", projectId: other.id, framework: "vite", buildCommand: "npm run build" }),
      200,
    );
    expect(updated).toMatchObject({
      id: other.id,
      name: "Other renamed",
      framework: "vite",
      buildCommand: "npm run build",
      gitProvider: null,
      uploadSessionId: null,
    });
    expect(await c.projectCount(t.orgId)).toBe(2);
  });

  it("ensure refuses an unscanned session and invalid services, changing nothing", async () => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    await expectProblem(await c.ensure(t, { name: "x", uploadSessionId: target.sessionId }), 400, "uploadSessionId");
    await expectProblem(await c.ensure(t, { name: "x", services: [{ name: "a" }, { name: "a" }] }), 400, "services.1.name");
    await expectProblem(await c.ensure(t, { name: "x", services: [{ name: "a", dependsOn: ["b"] }] }), 400, "services.0.dependsOn.0");
    await expectProblem(await c.ensure(t, { name: "x", services: [{ name: "bad name" }] }), 400, "services.0.name");
    await expectProblem(await c.ensure(t, { name: "x", services: [{ name: "a", environment: { "A=B": "1" } }] }), 400);
    await expectProblem(await c.ensure(t, { name: "x", services: [{ name: "a", secrets: {} }] }), 400, "services.0.secrets");
    await expectProblem(await c.ensure(t, { name: "" }), 400, "name");
    await expectProblem(await c.ensure(t, { name: "x", outputDirectory: "../etc" }), 400, "outputDirectory");
    expect(await c.projectCount(t.orgId)).toBe(0);
    expect((await c.sessionRow(target.sessionId))?.projectId).toBeNull();
  });

  it("scan of a session with nothing uploaded yet is a clear 400", async () => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    const p = await expectProblem(await c.scan(t, target.sessionId), 400);
    expect(p.detail).toMatch(/Nothing has been uploaded/);
    expect((await c.sessionRow(target.sessionId))?.scan).toBeNull();
  });
});

describe("folder upload: organization scoping", () => {
  it("another organization's session and project answer the same 404 as unknown ones", async () => {
    const owner = await seedTenant(h);
    const outsider = await seedTenant(h);
    const { target } = await c.uploadAndScan(owner, await tgz(NEXT_APP));
    const project = await expectStatus(await c.ensure(owner, { name: "Mine", uploadSessionId: target.sessionId }), 201);

    const foreignScan = await problemWithoutId(await c.scan(outsider, target.sessionId), 404);
    const unknownScan = await problemWithoutId(await c.scan(outsider, "ups_00000000000000000000000000"), 404);
    expect(foreignScan).toEqual(unknownScan);
    expect(foreignScan.detail).toBe("Upload session not found");

    const foreignSession = await problemWithoutId(await c.ensure(outsider, { name: "x", uploadSessionId: target.sessionId }), 404);
    const unknownSession = await problemWithoutId(await c.ensure(outsider, { name: "x", uploadSessionId: "ups_nope" }), 404);
    expect(foreignSession).toEqual(unknownSession);

    const foreignProject = await problemWithoutId(await c.ensure(outsider, { name: "x", projectId: project.id }), 404);
    const unknownProject = await problemWithoutId(await c.ensure(outsider, { name: "x", projectId: "prj_nope" }), 404);
    expect(foreignProject).toEqual(unknownProject);
    expect(foreignProject.detail).toBe("Project not found");
    expect(await c.projectCount(outsider.orgId)).toBe(0);
    expect((await expectStatus(await h.request(`/api/projects/${project.id}`, { token: owner.token }), 200)).name).toBe("Mine");

    if (target.requiresAuth) {
      // The relay itself: another organization cannot write into the session either.
      const foreignUpload = await problemWithoutId(await c.sendUpload(outsider, target, await tgz({ "x.txt": "x" })), 404);
      const unknownUpload = await problemWithoutId(
        await c.sendUpload(outsider, { ...target, url: "/api/projects/folder/upload/ups_00000000000000000000000000" }, await tgz({ "x.txt": "x" })),
        404,
      );
      expect(foreignUpload).toEqual(unknownUpload);
    }
  });
});

describe("folder upload: the relay (self-hosted) and presigned targets (cloud)", () => {
  it("relay: needs the bearer token and application/gzip", async (ctx) => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    if (!target.requiresAuth) ctx.skip();
    const bytes = await tgz(NEXT_APP);
    await expectProblem(await h.request(target.url, { method: "POST", headers: target.headers, body: bytes as Uint8Array<ArrayBuffer> }), 401);
    await expectProblem(await c.sendUpload(t, target, bytes, { "Content-Type": "application/octet-stream" }), 415);
    await expectProblem(await c.sendUpload(t, target, bytes, { "Content-Type": "application/json" }), 415);
    await expectProblem(await c.sendUpload(t, target, new Uint8Array(0)), 400);
    expect(await c.store().open(`${t.orgId}/${target.sessionId}.tar.gz`)).toBeNull();
    const res = await c.sendUpload(t, target, bytes);
    expect(await expectStatus(res, 200)).toMatchObject({ sessionId: target.sessionId, sizeBytes: bytes.length });
    expect((await c.sessionRow(target.sessionId))?.sizeBytes).toBe(bytes.length);
  });

  it("cloud: the relay route does not exist (the unknown-route 404)", async (ctx) => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    if (target.requiresAuth) ctx.skip();
    const path = `/api/projects/folder/upload/${target.sessionId}`;
    const res = await h.request(path, { method: "POST", token: t.token, headers: { "content-type": "application/gzip" }, body: new Uint8Array([1]) });
    expect(await problemWithoutId(res, 404)).toEqual({
      type: "urn:workspace:problem:not-found",
      title: "Not Found",
      status: 404,
      detail: `No route for POST ${path}`,
    });
    const doc = await expectStatus(await h.request("/api/openapi.json"), 200);
    expect(Object.keys(doc.paths)).not.toContain("/api/projects/folder/upload/{sessionId}");
  });

  it("presigned: plain fetch without the token works; tampered, expired, mistyped and missized uploads are refused", async (ctx) => {
    const t = await seedTenant(h);
    const bytes = await tgz(NEXT_APP);
    const target = await c.openSession(t, { sizeBytes: bytes.length });
    if (target.requiresAuth) ctx.skip();
    expect(target.headers["Content-Length"]).toBe(String(bytes.length));
    const put = (url: string, body: Uint8Array, headers: Record<string, string> = { "Content-Type": "application/gzip" }) =>
      fetch(url, { method: "PUT", headers, body: body as Uint8Array<ArrayBuffer> });

    const url = new URL(target.absoluteUrl);
    const signature = url.searchParams.get("X-Amz-Signature")!;
    const tamperedSignature = new URL(url);
    tamperedSignature.searchParams.set("X-Amz-Signature", (signature[0] === "a" ? "b" : "a") + signature.slice(1));
    const otherOrg = await seedTenant(h);
    const tamperedKey = target.absoluteUrl.replace(t.orgId, otherOrg.orgId);
    const longerExpiry = new URL(url);
    longerExpiry.searchParams.set("X-Amz-Expires", "604800");
    for (const bad of [tamperedSignature.toString(), tamperedKey, longerExpiry.toString()]) {
      const res = await put(bad, bytes);
      expect(res.status, await res.text()).toBe(403);
    }
    // The signed content type and size.
    expect((await put(target.absoluteUrl, bytes, { "Content-Type": "application/octet-stream" })).status).toBe(403);
    expect((await put(target.absoluteUrl, bytes.subarray(1))).status).toBe(403);
    expect(await c.store().open(`${t.orgId}/${target.sessionId}.tar.gz`)).toBeNull();

    // Expired: the same signer, 20 minutes ago.
    const store = c.store();
    if (store.kind !== "presigned") throw new Error("expected presigned storage");
    const stale = await store.presign({
      key: `${t.orgId}/${target.sessionId}.tar.gz`,
      sizeBytes: bytes.length,
      now: new Date(Date.now() - 20 * 60_000),
      expiresInSeconds: 15 * 60,
    });
    const expired = await put(stale.absoluteUrl, bytes);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toMatch(/expired/i);

    // As the spec says: the URL as is, its headers, and no Authorization header.
    const ok = await fetch(target.absoluteUrl, { method: target.method, headers: target.headers, body: bytes as Uint8Array<ArrayBuffer> });
    expect(ok.status, await ok.text()).toBe(200);
    expect(await expectStatus(await c.scan(t, target.sessionId), 200)).toMatchObject({ framework: "nextjs", sizeBytes: bytes.length });
  });
});

describe("folder upload: compose services", () => {
  function composeFolder(canary: string) {
    return {
      "compose.yaml": [
        "services:",
        "  web:",
        "    build: .",
        '    ports: ["3000:3000"]',
        "    depends_on: [db]",
        "    environment:",
        `      DATABASE_URL: postgres://app:${canary}-db@db:5432/app`,
        "      NODE_ENV: production",
        "  db:",
        "    image: postgres:16",
        "    environment:",
        `      - POSTGRES_PASSWORD=${canary}-pw`,
        "      - POSTGRES_USER=app",
        "  worker:",
        "    image: busybox:1.36",
        '    command: ["sh", "-c", "echo started && sleep 3600"]',
        "    environment:",
        `      QUEUE_TOKEN: ${canary}-queue`,
      ].join("\n"),
      "compose.override.yaml": "services:\n  web:\n    environment:\n      LOG_LEVEL: debug\n",
      Dockerfile: "FROM node:22\n",
      "package.json": JSON.stringify({ name: "web" }),
    };
  }

  async function storedEnv(orgId: string, projectId: string) {
    const rows = await h.db.select().from(projectServices).where(eq(projectServices.projectId, projectId)).orderBy(projectServices.position);
    const out: Record<string, Record<string, string>> = {};
    for (const r of rows) {
      out[r.name] = r.envCiphertext
        ? JSON.parse(await h.keyring.decrypt(r.envCiphertext, { orgId, table: "project_services", column: "environment", rowId: `${projectId}/${r.name}` }))
        : {};
      expect(Object.keys(out[r.name]!)).toEqual(r.envKeys);
    }
    return out;
  }

  it("round trip: secrets restored from the session, masks never stored, left-out services removed", async () => {
    const t = await seedTenant(h);
    const canary = `CANARY${crypto.randomUUID().replace(/-/g, "")}`;
    const { target, result } = await c.uploadAndScan(t, await tgz(composeFolder(canary)));
    expect(result).toMatchObject({ stack: "compose", framework: "compose", composeFile: "compose.yaml", dockerfile: "Dockerfile" });
    expect(result.services).toEqual([
      {
        name: "web",
        image: null,
        build: { context: ".", dockerfile: null },
        command: null,
        ports: ["3000:3000"],
        dependsOn: ["db"],
        environment: { DATABASE_URL: MASK, NODE_ENV: MASK, LOG_LEVEL: MASK },
      },
      { name: "db", image: "postgres:16", build: null, command: null, ports: [], dependsOn: [], environment: { POSTGRES_PASSWORD: MASK, POSTGRES_USER: MASK } },
      {
        name: "worker",
        image: "busybox:1.36",
        build: null,
        command: "sh -c 'echo started && sleep 3600'",
        ports: [],
        dependsOn: [],
        environment: { QUEUE_TOKEN: MASK },
      },
    ]);
    const rescan = await c.scan(t, target.sessionId);
    expect(await rescan.clone().text()).not.toContain(canary);
    expect((await expectStatus(rescan, 200)).services).toEqual(result.services);

    // Echo the scan unchanged, with the session: the real values come back.
    const created = await c.ensure(t, { name: "Stack", uploadSessionId: target.sessionId, services: result.services });
    const createdText = await created.clone().text();
    const project = await expectStatus(created, 201);
    expect(createdText).not.toContain(canary);
    expect(project.services).toEqual(result.services);
    expect(await storedEnv(t.orgId, project.id)).toEqual({
      web: { DATABASE_URL: `postgres://app:${canary}-db@db:5432/app`, NODE_ENV: "production", LOG_LEVEL: "debug" },
      db: { POSTGRES_PASSWORD: `${canary}-pw`, POSTGRES_USER: "app" },
      worker: { QUEUE_TOKEN: `${canary}-queue` },
    });

    // Without the session: masked values are dropped, values in the clear pass through, left-out services go.
    const [web, db] = result.services;
    const edited = await c.ensure(t, {
      name: "Stack",
      projectId: project.id,
      services: [
        { ...web, environment: { ...web.environment, NODE_ENV: "staging" } },
        { ...db, environment: { POSTGRES_PASSWORD: MASK, POSTGRES_USER: "admin" } },
      ],
    });
    const after = await expectStatus(edited, 200);
    expect(after.services.map((s: { name: string }) => s.name)).toEqual(["web", "db"]);
    expect(after.services[0].environment).toEqual({ NODE_ENV: MASK });
    expect(await storedEnv(t.orgId, project.id)).toEqual({ web: { NODE_ENV: "staging" }, db: { POSTGRES_USER: "admin" } });

    // With the session again: restored once more (by service and key); an unknown masked key is dropped.
    const restored = await c.ensure(t, {
      name: "Stack",
      projectId: project.id,
      uploadSessionId: target.sessionId,
      services: [{ name: "db", image: "postgres:17", environment: { POSTGRES_PASSWORD: "•••", NEW_KEY: MASK } }],
    });
    expect((await expectStatus(restored, 200)).services).toEqual([
      { name: "db", image: "postgres:17", build: null, command: null, ports: [], dependsOn: [], environment: { POSTGRES_PASSWORD: MASK } },
    ]);
    expect(await storedEnv(t.orgId, project.id)).toEqual({ db: { POSTGRES_PASSWORD: `${canary}-pw` } });

    // Skipping services leaves the set as it is; the session keeps its parsed services (encrypted) for the deploy step.
    const skipped = await expectStatus(await c.ensure(t, { name: "Stack", projectId: project.id, uploadSessionId: target.sessionId }), 200);
    expect(skipped.services.map((s: { name: string }) => s.name)).toEqual(["db"]);
    const session = (await h.db.select().from(uploadSessions).where(eq(uploadSessions.id, target.sessionId)))[0]!;
    expect(session.projectId).toBe(project.id);
    expect(
      JSON.parse(
        await h.keyring.decrypt(session.servicesCiphertext!, { orgId: t.orgId, table: "upload_sessions", column: "services", rowId: target.sessionId }),
      ),
    ).toMatchObject({
      worker: { QUEUE_TOKEN: `${canary}-queue` },
    });

    // Never stored as bullets, never in the clear, never logged.
    const tables = await dumpAllTables(h);
    expect(tables).not.toContain(canary);
    expect(tables).not.toContain("•");
    expect(h.logs.join("\n")).not.toContain(canary);
  });

  it("an invalid compose file is a clear 400", async () => {
    const t = await seedTenant(h);
    for (const [compose, detail] of [
      ["services: [oops", /not valid YAML/],
      ["services:\n  web:\n    depends_on: [ghost]\n    image: x\n", /depends_on/],
      ["services:\n  'bad name':\n    image: x\n", /service names/],
      ["version: '3'\n", /defines no services/],
      [
        "a: &a [1,2,3]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nservices: {}\n",
        /not valid YAML|alias/i,
      ],
    ] as const) {
      const target = await c.openSession(t);
      await c.upload(t, target, await tgz({ "docker-compose.yml": compose }));
      const p = await expectProblem(await c.scan(t, target.sessionId), 400);
      expect(p.detail).toMatch(detail);
      expect((await c.sessionRow(target.sessionId))?.scan).toBeNull();
    }
  });
});

describe("folder upload: per-organization caps", () => {
  const MIB = 1024 * 1024;
  const open = (t: Member, sizeBytes: number) => h.request("/api/projects/folder/session", { token: t.token, json: { sizeBytes } });

  async function expectCapped(res: Response, detail: RegExp) {
    const retryAfter = res.headers.get("retry-after");
    const p = await expectProblem(res, 429);
    expect(p).toMatchObject({ type: "urn:workspace:problem:too-many-requests", title: "Too Many Requests", status: 429 });
    expect(p.detail).toMatch(detail);
    expect(retryAfter).toMatch(/^\d+$/);
    return Number(retryAfter);
  }

  it(`caps bytes at ${ORG_SESSION_CAPS.maxBytes / 1024 / MIB} GiB and sessions at ${ORG_SESSION_CAPS.maxOpen} per organization: 429 with Retry-After; other organizations unaffected`, async () => {
    expect(ORG_SESSION_CAPS).toEqual({ maxOpen: 20, maxBytes: 2048 * MIB });
    const t = await seedTenant(h);
    const big: string[] = [];
    for (let i = 0; i < 6; i++) big.push((await expectStatus(await open(t, 300 * MIB), 201)).sessionId);
    // 1800 MiB open: another 300 MiB would pass 2 GiB; 248 MiB reaches it exactly.
    const retryAfter = await expectCapped(await open(t, 300 * MIB), /more than 2 GiB/);
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    await expectStatus(await open(t, 248 * MIB), 201);
    await expectCapped(await open(t, 1), /more than 2 GiB/);

    // Another organization is not held up by this one's sessions.
    const other = await seedTenant(h);
    await expectStatus(await open(other, 300 * MIB), 201);

    // An expired session no longer counts; an uploaded size replaces the hint.
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(uploadSessions.id, big[0]!));
    await h.db.update(uploadSessions).set({ sizeBytes: 1000 }).where(eq(uploadSessions.id, big[1]!));
    // Open: 5 × 300 MiB hinted (one of them uploaded: 1000 bytes) and 248 MiB, so 6 sessions of about 1448 MiB: 300 MiB fits again.
    await expectStatus(await open(t, 300 * MIB), 201);
    for (let i = 0; i < 13; i++) await expectStatus(await open(t, 1), 201);
    // 20 open: the next is refused whatever its size, Retry-After counting to the soonest expiry.
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() + 90_000) })
      .where(eq(uploadSessions.id, big[2]!));
    const wait = await expectCapped(await open(t, 1), new RegExp(`already has ${ORG_SESSION_CAPS.maxOpen} open upload sessions`));
    expect(wait).toBeGreaterThanOrEqual(85);
    expect(wait).toBeLessThanOrEqual(90);
    const rows = await h.db
      .select()
      .from(uploadSessions)
      .where(and(eq(uploadSessions.orgId, t.orgId), gt(uploadSessions.expiresAt, new Date())));
    expect(rows).toHaveLength(ORG_SESSION_CAPS.maxOpen);
    await expectStatus(await open(other, 1), 201);
  });

  it.runIf(h.realConcurrency)(
    "concurrent openings cannot pass the session cap (the organization row is locked)",
    async () => {
      const t = await seedTenant(h);
      const other = await seedTenant(h);
      const results = await Promise.all([
        ...Array.from({ length: ORG_SESSION_CAPS.maxOpen + 10 }, () => open(t, 1)),
        ...Array.from({ length: 3 }, () => open(other, 1)),
      ]);
      const statuses = await Promise.all(results.map(async (r) => (await r.text(), r.status)));
      expect(statuses.slice(0, -3).filter((s) => s === 201)).toHaveLength(ORG_SESSION_CAPS.maxOpen);
      expect(statuses.slice(0, -3).filter((s) => s === 429)).toHaveLength(10);
      expect(statuses.slice(-3)).toEqual([201, 201, 201]);
      expect(await h.db.select().from(uploadSessions).where(eq(uploadSessions.orgId, t.orgId))).toHaveLength(ORG_SESSION_CAPS.maxOpen);
    },
    60_000,
  );
});

describe("folder upload: lifecycle", () => {
  it("an expired session is gone, and the sweep removes it and its upload; live ones stay", async () => {
    const t = await seedTenant(h);
    const bytes = await tgz(NEXT_APP);
    const old = await c.openSession(t);
    await c.upload(t, old, bytes);
    const live = await c.openSession(t);
    await c.upload(t, live, bytes);
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(uploadSessions.id, old.sessionId));

    const gone = await problemWithoutId(await c.scan(t, old.sessionId), 404);
    expect(gone.detail).toBe("Upload session not found");
    await expectProblem(await c.ensure(t, { name: "x", uploadSessionId: old.sessionId }), 404);
    expect(await c.store().open(`${t.orgId}/${old.sessionId}.tar.gz`)).not.toBeNull();

    await c.sweep();
    expect(await c.sessionRow(old.sessionId)).toBeUndefined();
    expect(await c.store().open(`${t.orgId}/${old.sessionId}.tar.gz`)).toBeNull();
    expect(await c.sessionRow(live.sessionId)).toBeDefined();
    const kept = await c.store().open(`${t.orgId}/${live.sessionId}.tar.gz`);
    expect(kept?.size).toBe(bytes.length);
    await kept?.body.cancel();
  });
});
