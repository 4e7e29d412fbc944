/** Folder upload (functions/projects/folder/ensure.ts): POST /api/projects/ensure, compose services round trip included. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { projectServices, uploadSessions } from "../../../shared/db/schema";
import { folderClient, MASK, NEXT_APP } from "../../support/folder-client";
import { storedIn, expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { tgz } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: ensure", () => {
  it("ensure updates a project in place, and a retried ensure with the same session creates no duplicate", async () => {
    const t = await seedTenant(h);
    const { target } = await c.uploadAndScan(t, await tgz(NEXT_APP));
    const first = await expectBody(await c.ensure(t, { name: "One", uploadSessionId: target.sessionId }), 201, EnsuredProjectSchema);
    expect(first.gitProvider).toBe("upload");
    const retry = await expectBody(await c.ensure(t, { name: "One again", uploadSessionId: target.sessionId }), 200, EnsuredProjectSchema);
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
    const [web, db] = result.services!;
    const edited = await c.ensure(t, {
      name: "Stack",
      projectId: project.id,
      services: [
        { ...web, environment: { ...web!.environment, NODE_ENV: "staging" } },
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
    const skipped = await expectBody(await c.ensure(t, { name: "Stack", projectId: project.id, uploadSessionId: target.sessionId }), 200, EnsuredProjectSchema);
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
    expect(await storedIn(h, canary)).toEqual([]);
    expect(await storedIn(h, "•")).toEqual([]);
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
