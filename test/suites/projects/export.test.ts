/**
 * POST /api/projects/{id}/export (functions/projects/export.ts): the transfer bundle,
 * secret values in the clear, `project:admin` only, never cached nor logged. An
 * upload project's tarball: a presigned GET on object storage (the Worker's S3
 * server here), null on the Node adapter's relay (disk) store.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ProjectExportSchema } from "../../../functions/projects/export-schema";
import { latestUploadKey, readProjectExport } from "../../../functions/projects/export-store";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { uploadSessions } from "../../../shared/db/schema";
import { deploymentHelpers } from "../../support/deployments";
import { folderClient } from "../../support/folder-client";
import { expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant, seedToken } from "../../support/harness";
import { projectHelpers, type Project } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { tgz } from "../../support/tar-fixtures";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const c = folderClient(h);
const { queue } = deploymentHelpers(h);

const exportOf = (t: Member, p: { id: string }, token?: string) => call(t, `/${p.id}/export`, { method: "POST", token });
const ok = async (t: Member, p: { id: string }) => {
  const res = await exportOf(t, p);
  expect(res.headers.get("cache-control")).toBe("no-store");
  return expectBody(res, 200, ProjectExportSchema);
};
const post = (t: Member, p: Project, path: string, json: unknown) => call(t, `/${p.id}${path}`, { method: "POST", json });
const patch = (t: Member, p: Project, path: string, json: unknown) => call(t, `/${p.id}${path}`, { method: "PATCH", json });

describe("projects: export", () => {
  it("returns every configuration field, secrets in the clear, no-store, and logs none of them", async () => {
    const t = await seedTenant(h);
    const canary = (name: string) => `canary-${name}-${crypto.randomUUID()}`;
    const secrets = { prod: canary("prod"), preview: canary("preview"), token: canary("token") };
    const p = await create(t, { gitOwner: "acme", gitRepo: "site", gitBranch: "main", framework: "nextjs", buildCommand: "npm run build" });
    await expectStatus(await post(t, p, "/auto-deploy", { enabled: true }), 200);
    await expectStatus(await post(t, p, "/options", { installCommand: "npm ci", rootDirectory: "web" }), 200);
    await expectStatus(await patch(t, p, "/resources", { production: { cpuCores: 2, memoryMb: 1024 }, diskGb: 20, sleepMode: "always_on", port: 8080 }), 200);
    await expectStatus(await post(t, p, "/environments", { name: "staging", branch: "develop" }), 201);
    await expectStatus(await post(t, p, "/environments", { name: "pr-7", branch: "feature/x" }), 201);
    await expectStatus(
      await patch(t, p, "/env", {
        upserts: [
          { key: "PLAIN", value: "one", isSecret: false },
          { key: "API_KEY", value: secrets.prod, isSecret: true },
        ],
      }),
      200,
    );
    await expectStatus(
      await patch(t, p, "/env", {
        environment: "staging",
        upserts: [
          { key: "Z_PLAIN", value: "two", isSecret: false },
          { key: "DB_PASSWORD", value: secrets.preview, isSecret: true },
        ],
      }),
      200,
    );
    // Connecting makes a domain the primary: "first" (the older one) ends primary, so primary-last is not creation order.
    for (const domain of ["first.example.com", "second.example.com", "first.example.com"]) await expectStatus(await post(t, p, "/connect", { domain }), 200);
    await expectStatus(await patch(t, p, "/clone-token", { token: secrets.token }), 200);

    const bundle = await ok(t, p);
    expect(bundle).toEqual({
      id: p.id,
      name: p.name,
      framework: "nextjs",
      disabled: false,
      git: { provider: "github", owner: "acme", repo: "site", branch: "main", autoDeploy: true },
      options: {
        rootDirectory: "web",
        installCommand: "npm ci",
        buildCommand: "npm run build",
        startCommand: null,
        outputDirectory: null,
        runtimeVersion: null,
        healthCheckPath: null,
      },
      resources: { production: { cpuCores: 2, memoryMb: 1024 }, build: { cpuCores: 2, memoryMb: 2048 }, diskGb: 20, sleepMode: "always_on", port: 8080 },
      environments: [
        {
          name: "production",
          kind: "production",
          branch: null,
          env: [
            { key: "API_KEY", value: secrets.prod, isSecret: true },
            { key: "PLAIN", value: "one", isSecret: false },
          ],
        },
        { name: "pr-7", kind: "preview", branch: "feature/x", env: [] },
        {
          name: "staging",
          kind: "preview",
          branch: "develop",
          env: [
            { key: "DB_PASSWORD", value: secrets.preview, isSecret: true },
            { key: "Z_PLAIN", value: "two", isSecret: false },
          ],
        },
      ],
      domains: [
        { hostname: "second.example.com", primary: false },
        { hostname: "first.example.com", primary: true },
      ],
      services: [],
      cloneToken: secrets.token,
      source: { kind: "git", artifact: null },
    });
    // The store the transfer calls directly reads the same bundle.
    const direct = await readProjectExport(h.db, h.keyring, t.orgId, p.id);
    expect(direct).toEqual({ ...bundle, source: { kind: "git" }, latestArtifactKey: null });

    // An admin may export too; nothing about the project changed.
    const admin = await seedMember(h, t.orgId, "admin");
    expect(await ok(admin, p)).toEqual(bundle);
    const logs = h.logs.join("\n");
    for (const secret of Object.values(secrets)) expect(logs).not.toContain(secret);
  });

  it("a project without a repository, disabled: git null, source none, plain defaults", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/disable`, { method: "POST" }), 200);
    expect(await ok(t, p)).toMatchObject({
      disabled: true,
      git: null,
      environments: [{ name: "production", kind: "production", env: [] }],
      domains: [],
      services: [],
      cloneToken: null,
      source: { kind: "none", artifact: null },
    });
  });

  it("needs project:admin (a member, a token without the scope: 403); another tenant's project is the usual 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await patch(t, p, "/env", { upserts: [{ key: "S", value: "secret-value-403", isSecret: true }] }), 200);
    const member = await seedMember(h, t.orgId, "member");
    await expectProblem(await exportOf(member, p), 403);
    const scoped = await seedToken(h, t.userId, { scopes: ["project:read", "project:write", "project:list"] });
    await expectProblem(await exportOf(t, p, scoped.token), 403);
    const adminScoped = await seedToken(h, t.userId, { scopes: ["project:admin"] });
    await expectBody(await exportOf(t, p, adminScoped.token), 200, ProjectExportSchema);
    const other = await seedTenant(h);
    const res = await exportOf(other, p);
    expect(res.headers.get("cache-control")).not.toBe("no-store");
    expect(await res.clone().text()).not.toContain("secret-value-403");
    await expectProblem(res, 404);
  });

  it("an upload project: services with values in the clear, the latest tarball as a presigned GET (object storage) or null (relay)", async () => {
    const t = await seedTenant(h);
    const canary = `canary-svc-${crypto.randomUUID()}`;
    const bytes = await tgz({
      "compose.yaml": `services:\n  web:\n    build: .\n    ports: ["3000:3000"]\n    environment:\n      API_KEY: ${canary}\n      MODE: prod\n    depends_on: [db]\n  db:\n    image: postgres:16\n`,
      Dockerfile: "FROM node:22\n",
    });
    const { target, result } = await c.uploadAndScan(t, bytes);
    const ensured = await expectBody(
      await c.ensure(t, { name: `up ${target.sessionId}`, uploadSessionId: target.sessionId, services: result.services }),
      201,
      EnsuredProjectSchema,
    );
    const p = { id: ensured.id };
    const sessionKey = `${t.orgId}/${target.sessionId}.tar.gz`;

    const bundle = await ok(t, p);
    expect(bundle.git).toBeNull();
    expect(bundle.services).toEqual([
      // In the compose file's order, as the ensure stored them.
      {
        name: "web",
        image: null,
        build: { context: ".", dockerfile: null },
        command: null,
        ports: ["3000:3000"],
        dependsOn: ["db"],
        environment: { API_KEY: canary, MODE: "prod" },
      },
      { name: "db", image: "postgres:16", build: null, command: null, ports: [], dependsOn: [], environment: {} },
    ]);
    expect(bundle.source.kind).toBe("upload");
    expect((await readProjectExport(h.db, h.keyring, t.orgId, p.id)).latestArtifactKey).toBe(sessionKey);

    const store = c.store();
    // The Worker's store is the run's S3 server; the Node harness relays to disk.
    expect(store.kind).toBe(h.runtime === "worker" ? "presigned" : "relay");
    if (store.kind === "presigned") {
      const artifact = bundle.source.artifact!;
      expect(artifact.sizeBytes).toBe(bytes.length);
      const left = Date.parse(artifact.expiresAt) - Date.now();
      expect(left).toBeGreaterThan(14 * 60_000);
      expect(left).toBeLessThanOrEqual(15 * 60_000);
      // Plain fetch, no token: the same bytes.
      const got = await fetch(artifact.url);
      expect(got.status).toBe(200);
      expect(new Uint8Array(await got.arrayBuffer())).toEqual(bytes);
      // A link signed 20 minutes ago has expired; nothing stored: no link.
      const stale = await store.presignGet({ key: sessionKey, now: new Date(Date.now() - 20 * 60_000), expiresInSeconds: 15 * 60 });
      const refused = await fetch(stale!.url);
      expect(refused.status).toBe(403);
      await refused.body?.cancel();
      expect(await store.presignGet({ key: `${t.orgId}/upl_missing0.tar.gz`, now: new Date(), expiresInSeconds: 60 })).toBeNull();
    } else {
      // The relay (disk) store hands out no URL: the transfer reads the key itself.
      expect(bundle.source.artifact).toBeNull();
    }

    // Once the session expired, the newest upload deployment's durable artifact is what a redeploy (and so the export) takes.
    const d = await expectStatus(await queue(t, { projectId: p.id }), 201);
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(uploadSessions.id, target.sessionId));
    const artifactKey = `artifacts/${t.orgId}/${d.id}.tar.gz`;
    expect(await latestUploadKey(h.db, p.id, new Date())).toBe(artifactKey);
    const after = await ok(t, p);
    if (store.kind === "presigned") {
      const got = await fetch(after.source.artifact!.url);
      expect(new Uint8Array(await got.arrayBuffer())).toEqual(bytes);
      expect(after.source.artifact!.url).toContain(d.id);
    } else {
      expect(after.source.artifact).toBeNull();
    }
    expect(h.logs.join("\n")).not.toContain(canary);
  });
});
