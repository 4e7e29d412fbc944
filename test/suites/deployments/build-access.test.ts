/**
 * POST /api/deployments/build/access (functions/deployments/build-access.ts): the
 * folder-upload flow's last step. The tarball becomes the deployment's own durable
 * artifact in the runtime's upload store (disk on Node, the run's S3 server on the
 * Worker) and survives the session's expiry and the upload sweep; the services go
 * with it, values encrypted for the deployment; a redeploy copies that artifact.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { z } from "@hono/zod-openapi";
import { decryptDeploymentServices } from "../../../functions/deployments/queue";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { DeploymentSessionSchema } from "../../../functions/projects/deployment-session";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { ServiceSchema } from "../../../functions/projects/folder/schema";
import { ProjectSchema } from "../../../functions/projects/schema";
import { deployments, uploadSessions } from "../../../shared/db/schema";
import { deploymentHelpers } from "../../support/deployments";
import { folderClient, MASK, NEXT_APP } from "../../support/folder-client";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { tgz } from "../../support/tar-fixtures";

const h = useRuntimeHarness();
const c = folderClient(h);
const { call } = projectHelpers(h);
const { queue, read, runToReady } = deploymentHelpers(h);

const BuildAccess = z.object({ deployment: DeploymentSchema, session: DeploymentSessionSchema });

const access = (t: Member, json: Record<string, unknown>) => h.request("/api/deployments/build/access", { token: t.token, org: t.orgId, json });

function composeFolder(canary: string) {
  return {
    "compose.yaml": `services:\n  web:\n    build: .\n    ports: ["3000:3000"]\n    environment:\n      API_KEY: ${canary}\n    depends_on: [db]\n  db:\n    image: postgres:16\n`,
    Dockerfile: "FROM node:22\n",
  };
}

/** session → upload → scan → ensure (with the scan's services unless `services: false`). */
async function ensured(t: Member, files: Record<string, string>, opts: { services?: boolean } = {}) {
  const bytes = await tgz(files);
  const { target, result } = await c.uploadAndScan(t, bytes);
  const body = {
    name: `app ${target.sessionId}`,
    uploadSessionId: target.sessionId,
    ...(opts.services !== false && result.services ? { services: result.services } : {}),
  };
  const project = await expectBody(await c.ensure(t, body), 201, EnsuredProjectSchema);
  return { bytes, sessionId: target.sessionId, project };
}

async function row(id: string) {
  const [d] = await h.db.select().from(deployments).where(eq(deployments.id, id));
  return d!;
}

async function storedSize(key: string): Promise<number | null> {
  const found = await c.store().open(key);
  if (!found) return null;
  const bytes = await new Response(found.body).arrayBuffer();
  return bytes.byteLength;
}

describe("deployments: build/access", () => {
  it("queues an upload deployment from a durable copy that survives the session's expiry and the sweep; a redeploy copies it again", async () => {
    const t = await seedTenant(h);
    const canary = `canary-${crypto.randomUUID()}`;
    const { bytes, sessionId, project } = await ensured(t, composeFolder(canary));

    const answer = await expectBody(await access(t, { projectId: project.id, uploadSessionId: sessionId }), 201, BuildAccess);
    const d = answer.deployment;
    expect(d).toMatchObject({
      projectId: project.id,
      environment: "production",
      status: "queued",
      source: "upload",
      uploadSessionId: sessionId,
      commitSha: null,
      createdBy: t.userId,
      startedAt: null,
      services: [
        { name: "db", image: "postgres:16", build: null, command: null, ports: [], dependsOn: [] },
        { name: "web", image: null, build: { context: ".", dockerfile: null }, ports: ["3000:3000"], dependsOn: ["db"] },
      ],
    });
    expect(answer.session).toMatchObject({ projectId: project.id, scopes: ["project:read", "project:deployment:list"] });
    expect(answer.session.token).toMatch(/^wsd_/);
    expect(JSON.stringify(answer)).not.toContain(canary);

    // The artifact is the deployment's own key, a copy of the session's tarball.
    const stored = await row(d.id);
    expect(stored.artifactKey).toBe(`artifacts/${t.orgId}/${d.id}.tar.gz`);
    expect(await storedSize(stored.artifactKey!)).toBe(bytes.length);
    // Compose values: encrypted for this deployment, never in the clear.
    expect(JSON.stringify(stored)).not.toContain(canary);
    expect(await decryptDeploymentServices(h.keyring, stored)).toEqual({ web: { API_KEY: canary } });

    // The read-only session follows it.
    expect(await expectBody(await h.request(`/api/deployments/${d.id}`, { token: answer.session.token }), 200, DeploymentSchema)).toEqual(d);

    // The session expires and the sweep runs (on Node: an hour later, past the orphan grace too): the artifact stays.
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(uploadSessions.id, sessionId));
    await c.sweep(new Date(Date.now() + 3600_000));
    expect(await c.sessionRow(sessionId)).toBeUndefined();
    expect(await storedSize(`${t.orgId}/${sessionId}.tar.gz`)).toBeNull();
    expect(await storedSize(stored.artifactKey!)).toBe(bytes.length);
    expect((await row(d.id)).artifactKey).toBe(stored.artifactKey);

    // The runner's steps: timings.
    await runToReady(d.id);
    const done = await expectBody(await read(t, d.id), 200, DeploymentSchema);
    expect(done.startedAt).toBe(done.transitions.find((x) => x.status === "building")!.at);

    // A redeploy (POST /api/deployments) copies the previous artifact to its own key, services and values with it.
    const again = await expectBody(await queue(t, { projectId: project.id }), 201, DeploymentSchema);
    expect(again).toMatchObject({ source: "upload", uploadSessionId: sessionId, services: d.services });
    const againRow = await row(again.id);
    expect(againRow.artifactKey).toBe(`artifacts/${t.orgId}/${again.id}.tar.gz`);
    expect(await storedSize(againRow.artifactKey!)).toBe(bytes.length);
    expect(await decryptDeploymentServices(h.keyring, againRow)).toEqual({ web: { API_KEY: canary } });
  });

  it("POST /api/deployments on an upload project copies the live session's tarball, never points at it", async () => {
    const t = await seedTenant(h);
    const { bytes, sessionId, project } = await ensured(t, NEXT_APP);
    const d = await expectBody(await queue(t, { projectId: project.id }), 201, DeploymentSchema);
    expect(d).toMatchObject({ source: "upload", uploadSessionId: sessionId, services: null });
    const stored = await row(d.id);
    expect(stored.artifactKey).toBe(`artifacts/${t.orgId}/${d.id}.tar.gz`);
    expect(stored.servicesCiphertext).toBeNull();
    expect(await storedSize(stored.artifactKey!)).toBe(bytes.length);
  });

  it("without services in the ensure, the scan's parsed services and captured values go with the deployment", async () => {
    const t = await seedTenant(h);
    const canary = `canary-${crypto.randomUUID()}`;
    const { sessionId, project } = await ensured(t, composeFolder(canary), { services: false });
    expect(project.services).toEqual([]);
    const { deployment } = await expectBody(await access(t, { projectId: project.id, uploadSessionId: sessionId }), 201, BuildAccess);
    expect(deployment.services?.map((s) => s.name)).toEqual(["db", "web"]);
    expect(await decryptDeploymentServices(h.keyring, await row(deployment.id))).toEqual({ web: { API_KEY: canary } });
  });

  it("refuses an unscanned or unensured session, another project's session, an unknown environment (400 naming the field), a disabled project (409), a foreign session or project (404)", async () => {
    const t = await seedTenant(h);
    const { sessionId, project } = await ensured(t, NEXT_APP);

    const unscanned = await c.openSession(t);
    expect((await expectProblem(await access(t, { projectId: project.id, uploadSessionId: unscanned.sessionId }), 400, "uploadSessionId")).detail).toMatch(
      /not been scanned/,
    );
    const { target: scannedOnly } = await c.uploadAndScan(t, await tgz(NEXT_APP));
    expect((await expectProblem(await access(t, { projectId: project.id, uploadSessionId: scannedOnly.sessionId }), 400, "uploadSessionId")).detail).toMatch(
      /No ensure has used this upload session/,
    );
    const other = await ensured(t, NEXT_APP);
    expect((await expectProblem(await access(t, { projectId: project.id, uploadSessionId: other.sessionId }), 400, "uploadSessionId")).detail).toMatch(
      /another project/,
    );
    await expectProblem(await access(t, { projectId: project.id, uploadSessionId: sessionId, environment: "nope" }), 400, "environment");
    await expectProblem(await access(t, { projectId: project.id }), 400, "uploadSessionId");

    const stranger = await seedTenant(h);
    expect((await expectProblem(await access(stranger, { projectId: project.id, uploadSessionId: sessionId }), 404)).detail).toBe("Project not found");
    const theirs = await ensured(stranger, NEXT_APP);
    expect((await expectProblem(await access(t, { projectId: project.id, uploadSessionId: theirs.sessionId }), 404)).detail).toBe("Upload session not found");

    await expectBody(await call(t, `/${project.id}/disable`, { method: "POST" }), 200, ProjectSchema);
    expect((await expectProblem(await access(t, { projectId: project.id, uploadSessionId: sessionId }), 409)).detail).toMatch(/disabled/);
    // Nothing was queued by any refusal.
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, project.id))).toEqual([]);
  });

  it("GET /api/projects/:id/services shows the ensured services with every value masked; none: an empty list; foreign: 404", async () => {
    const t = await seedTenant(h);
    const canary = `canary-${crypto.randomUUID()}`;
    const { project } = await ensured(t, composeFolder(canary));
    const res = await call(t, `/${project.id}/services`);
    const text = await res.clone().text();
    expect(text).not.toContain(canary);
    const { items } = await expectBody(res, 200, z.object({ items: z.array(ServiceSchema) }));
    expect(items).toEqual([
      {
        name: "web",
        image: null,
        build: { context: ".", dockerfile: null },
        command: null,
        ports: ["3000:3000"],
        dependsOn: ["db"],
        environment: { API_KEY: MASK },
      },
      { name: "db", image: "postgres:16", build: null, command: null, ports: [], dependsOn: [], environment: {} },
    ]);
    const plain = await ensured(t, NEXT_APP);
    expect(await expectBody(await call(t, `/${plain.project.id}/services`), 200, z.object({ items: z.array(ServiceSchema) }))).toEqual({ items: [] });
    const stranger = await seedTenant(h);
    await expectProblem(await call(stranger, `/${project.id}/services`), 404);
  });

  it("deleting the project removes its deployments' artifacts from the upload store", async () => {
    const t = await seedTenant(h);
    const { bytes, sessionId, project } = await ensured(t, NEXT_APP);
    const first = await expectBody(await access(t, { projectId: project.id, uploadSessionId: sessionId }), 201, BuildAccess);
    const second = await expectBody(await queue(t, { projectId: project.id }), 201, DeploymentSchema);
    const keys = [(await row(first.deployment.id)).artifactKey!, (await row(second.id)).artifactKey!];
    for (const key of keys) expect(await storedSize(key)).toBe(bytes.length);
    await expectStatus(await h.request(`/api/projects/${project.id}`, { method: "DELETE", token: t.token, org: t.orgId }), 200);
    for (const key of keys) expect(await storedSize(key)).toBeNull();
  });

  it("a read-only token cannot queue (project:write)", async () => {
    const t = await seedTenant(h);
    const { sessionId, project } = await ensured(t, NEXT_APP);
    const { session } = await expectBody(await access(t, { projectId: project.id, uploadSessionId: sessionId }), 201, BuildAccess);
    await expectProblem(
      await h.request("/api/deployments/build/access", { token: session.token, json: { projectId: project.id, uploadSessionId: sessionId } }),
      403,
    );
  });
});
