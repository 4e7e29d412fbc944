/** Deployments (functions/projects/deployments.ts): GET /deployments, POST /deployment-session. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { Preview } from "../../../functions/projects/deletion";
import { EnvironmentSchema } from "../../../functions/projects/environments";
import { apiTokens } from "../../../shared/db/schema";
import { eventually, expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { DeploymentPage, projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, addDeployment } = projectHelpers(h);

describe("projects: deployments and sessions", () => {
  it("lists deployments newest first, paginated, optionally per environment", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201, EnvironmentSchema);
    const made = [await addDeployment(p, "ready"), await addDeployment(p, "failed", "staging"), await addDeployment(p, "building")];
    const first = await expectBody(await call(t, `/${p.id}/deployments?limit=2`), 200, DeploymentPage);
    expect(first.items.map((d: { id: string }) => d.id)).toEqual([made[2]!.id, made[1]!.id]);
    expect(first.items[0]).toMatchObject({ environment: "production", status: "building", branch: "main", commitSha: "a".repeat(40), finishedAt: null });
    const second = await expectBody(await call(t, `/${p.id}/deployments?limit=2&cursor=${first.nextCursor}`), 200, DeploymentPage);
    expect(second).toEqual({ items: [expect.objectContaining({ id: made[0]!.id })], nextCursor: null });
    const staging = await expectBody(await call(t, `/${p.id}/deployments?environment=staging`), 200, DeploymentPage);
    expect(staging.items.map((d: { id: string }) => d.id)).toEqual([made[1]!.id]);
    expect((await expectBody(await call(t, `/${p.id}/deployments?environment=nope`), 200, DeploymentPage)).items).toEqual([]);
    // project:deployment:list, not project:read, guards the list.
    const scoped = await seedMember(h, t.orgId, "member", { scopes: ["project:read"] });
    await expectProblem(await call(scoped, `/${p.id}/deployments`), 403);
  });

  it("a deployment session reads its project's deployments and nothing else", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const sibling = await create(t);
    await addDeployment(p);
    const before = Date.now();
    const viewer = await seedMember(h, t.orgId, "viewer");
    const s = await expectStatus(await call(viewer, `/${p.id}/deployment-session`, { method: "POST" }), 201);
    expect(s.token).toMatch(/^wsd_/);
    expect(s.projectId).toBe(p.id);
    expect(s.scopes).toEqual(["project:read", "project:deployment:list"]);
    const ttl = new Date(s.expiresAt).getTime() - before;
    expect(ttl).toBeGreaterThan(14 * 60 * 1000);
    expect(ttl).toBeLessThanOrEqual(15 * 60 * 1000 + 5000);

    const session = { ...t, token: s.token };
    expect((await expectBody(await call(session, `/${p.id}/deployments`), 200, DeploymentPage)).items).toHaveLength(1);
    // Refused everywhere else, the same project's other routes and other projects included.
    const refused: Array<[string, string, unknown?]> = [
      ["GET", `/api/projects/${sibling.id}/deployments`],
      ["GET", `/api/projects/${p.id}`],
      ["GET", `/api/projects/${p.id}/env`],
      ["GET", `/api/projects/${p.id}/info`],
      ["POST", `/api/projects/${p.id}/deployment-session`],
      ["PATCH", `/api/projects/${p.id}/env`, { upserts: [{ key: "A", value: "1" }] }],
      ["DELETE", `/api/projects/${p.id}`],
      ["GET", "/api/projects"],
      ["GET", "/api/me"],
      ["GET", "/api/tokens"],
      ["POST", "/api/tokens", { name: "escalate" }],
      ["GET", "/api/settings"],
      ["POST", "/api/invitations/accept", { code: "x" }],
    ];
    for (const [method, path, json] of refused) {
      await expectProblem(await h.request(path, { method, token: s.token, json }), 403);
    }
    // Pinned to the project's organization.
    const elsewhere = await expectStatus(await h.request("/api/orgs", { token: t.token, json: { name: "second" } }), 201);
    await expectProblem(await h.request(`/api/projects/${p.id}/deployments`, { token: s.token, org: elsewhere.id }), 403);
    await expectStatus(await h.request(`/api/projects/${p.id}/deployments`, { token: s.token, org: t.orgId }), 200);
    // Expired: 401 like any expired token. Changed behind the API's back, so a
    // cached lookup learns of it through the database's notification: allow it a moment.
    await h.db
      .update(apiTokens)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(apiTokens.projectId, p.id));
    await eventually(async () => expectProblem(await call(session, `/${p.id}/deployments`), 401));
  });

  it("a session is narrowed to its creator's permissions and dies with the project", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const readOnly = await seedMember(h, t.orgId, "member", { scopes: ["project:read"] });
    const s = await expectStatus(await call(readOnly, `/${p.id}/deployment-session`, { method: "POST" }), 201);
    expect(s.scopes).toEqual(["project:read"]);
    await expectProblem(await h.request(`/api/projects/${p.id}/deployments`, { token: s.token }), 403);

    const full = await expectStatus(await call(t, `/${p.id}/deployment-session`, { method: "POST" }), 201);
    await expectStatus(await h.request(`/api/projects/${p.id}/deployments`, { token: full.token }), 200);
    await expectBody(await call(t, `/${p.id}`, { method: "DELETE" }), 200, Preview);
    await expectProblem(await h.request(`/api/projects/${p.id}/deployments`, { token: full.token }), 401);
    expect(await h.db.select().from(apiTokens).where(eq(apiTokens.projectId, p.id))).toEqual([]);
  });
});
