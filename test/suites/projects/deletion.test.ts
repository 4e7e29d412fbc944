/** Deletion (functions/projects/deletion.ts): GET /deletion-preview, DELETE /api/projects/{id}. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CloneTokenState } from "../../../functions/projects/clone-token";
import { Preview } from "../../../functions/projects/deletion";
import { EnvironmentSchema } from "../../../functions/projects/environments";
import { ProjectSchema } from "../../../functions/projects/schema";
import { appendLogLines } from "../../../functions/logs/store";
import { deployments, domains, environments, envVars, logLines, logSequences, projects, requestLogBatches } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { requestSeeder } from "../logs/support";
import { storedRequestLines } from "../../support/request-lines";

const h = useRuntimeHarness();
const { create, call, addDeployment } = projectHelpers(h);

describe("projects: deletion", () => {
  it("the preview counts what DELETE removes; DELETE removes exactly that, then every route answers 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const keep = await create(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201, EnvironmentSchema);
    await expectStatus(
      await call(t, `/${p.id}/env`, {
        method: "PATCH",
        json: {
          upserts: [
            { key: "A", value: "1" },
            { key: "B", value: "2", isSecret: true },
          ],
        },
      }),
      200,
    );
    await expectStatus(await call(t, `/${p.id}/env`, { method: "PATCH", json: { environment: "staging", upserts: [{ key: "A", value: "s" }] } }), 200);
    await expectStatus(await call(t, `/${keep.id}/env`, { method: "PATCH", json: { upserts: [{ key: "A", value: "1" }] } }), 200);
    const domain = `del-${newId("d").slice(-10)}.example.com`;
    await expectBody(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain } }), 200, ProjectSchema);
    await expectBody(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_x" } }), 200, CloneTokenState);
    const live = await addDeployment(p);
    const failed = await addDeployment(p, "failed", "staging");
    const kept = await addDeployment(keep);
    // Log lines: of each deployment, of the project itself, and of the other project (which keeps them).
    const line = (projectId: string, deploymentId: string | null) =>
      ({ orgId: t.orgId, projectId, deploymentId, kind: "runtime", stream: "stdout", at: new Date(), message: "canary line" }) as const;
    await appendLogLines(h.db, [line(p.id, live.id), line(p.id, failed.id), line(p.id, null), line(keep.id, kept.id)]);
    // Request lines (server logs) of both projects.
    const request = { path: "/canary", status: 200 };
    const seedRequests = requestSeeder(h);
    await seedRequests({ orgId: t.orgId, projectId: p.id }, [
      { ...request, deploymentId: live.id },
      { ...request, deploymentId: live.id },
    ]);
    await seedRequests({ orgId: t.orgId, projectId: keep.id }, [{ ...request, deploymentId: kept.id }]);
    await expectStatus(await call(t, `/${p.id}/deployment-session`, { method: "POST" }), 201);

    const expected = { projects: 1, environments: 2, envVars: 3, domains: 1, deployments: 2, services: 0, cloneTokens: 1, deploymentSessions: 1 };
    const preview = await expectBody(await call(t, `/${p.id}/deletion-preview`), 200, Preview);
    expect(preview).toEqual({ projectId: p.id, removes: expected });

    const member = await seedMember(h, t.orgId, "member");
    await expectProblem(await call(member, `/${p.id}`, { method: "DELETE" }), 403);
    const removed = await expectBody(await call(t, `/${p.id}`, { method: "DELETE" }), 200, Preview);
    expect(removed).toEqual(preview);

    for (const table of [environments, envVars, domains, deployments, logLines, logSequences, requestLogBatches]) {
      expect(await h.db.select().from(table).where(eq(table.projectId, p.id))).toEqual([]);
    }
    expect(await h.db.select().from(projects).where(eq(projects.id, p.id))).toEqual([]);
    await expectProblem(await call(t, `/${p.id}`), 404);
    await expectProblem(await call(t, `/${p.id}`, { method: "DELETE" }), 404);
    await expectProblem(await call(t, `/${p.id}/deletion-preview`), 404);
    // The other project is untouched; the domain is free again.
    expect((await expectStatus(await call(t, `/${keep.id}/env`), 200)).items).toHaveLength(1);
    expect(await h.db.select({ message: logLines.message }).from(logLines).where(eq(logLines.projectId, keep.id))).toEqual([{ message: "canary line" }]);
    expect((await storedRequestLines(h.db, keep.id)).map((l) => l.path)).toEqual(["/canary"]);
    await expectBody(await call(t, `/${keep.id}/connect`, { method: "POST", json: { domain } }), 200, ProjectSchema);
  });
});
