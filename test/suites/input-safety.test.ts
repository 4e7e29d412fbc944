/**
 * Input Postgres cannot store faithfully (NUL, unpaired surrogates) never turns
 * into a 500 or a changed value, whichever route it reaches.
 */
import { describe, expect, it } from "vitest";
import { expectProblem, expectStatus, seedTenant } from "../support/harness";
import { useRuntimeHarness } from "../support/runtime";

const h = useRuntimeHarness();
describe("input safety", () => {
  it("refuses NUL and unpaired surrogates in JSON bodies with 400 naming the field", async () => {
    const t = await seedTenant(h);
    const nul = await h.request("/api/orgs", { token: t.token, json: { name: "a\u0000b" } });
    expect((await expectProblem(nul, 400, "name")).detail).toMatch(/NUL/);
    const surrogate = await h.request("/api/settings/deploy-defaults", {
      method: "PATCH",
      token: t.token,
      body: '{"defaultDeployTarget":"server","defaultServerId":"srv\\ud800"}',
      headers: { "content-type": "application/json" },
    });
    await expectProblem(surrogate, 400, "defaultServerId");
    const key = await h.request("/api/tokens", { token: t.token, json: { name: "x", "sc\u0000opes": [] } });
    await expectProblem(key, 400, "sc\u0000opes");
    expect((await expectStatus(await h.request("/api/settings", { token: t.token }), 200)).defaultServerId).toBeNull();
  });

  it("answers an id with NUL like any unknown id", async () => {
    const t = await seedTenant(h);
    const unknown = await expectProblem(await h.request("/api/tokens/tok_unknown", { method: "DELETE", token: t.token }), 404);
    const nul = await expectProblem(await h.request("/api/tokens/tok%00x", { method: "DELETE", token: t.token }), 404);
    expect(nul.detail).toBe(unknown.detail);
    await expectProblem(await h.request(`/api/orgs/${t.orgId}/members/usr%00x`, { method: "DELETE", token: t.token }), 404);
    await expectProblem(await h.request("/api/orgs/org%00x/members", { token: t.token }), 403);
  });

  it("refuses NUL in query values with 400 naming the parameter", async () => {
    const t = await seedTenant(h);
    await expectProblem(await h.request("/api/tokens?cursor=%00", { token: t.token }), 400, "cursor");
    await expectProblem(await h.request(`/api/orgs/${t.orgId}/members?cursor=a%00`, { token: t.token }), 400, "cursor");
  });

  it("says 'must be a number' for a wrong type and 'is required' only when absent", async () => {
    const t = await seedTenant(h);
    const wrong = await expectProblem(
      await h.request("/api/settings/forward-git", { method: "PATCH", token: t.token, json: { enabled: "yes" } }),
      400,
      "enabled",
    );
    expect(wrong.detail).toBe("enabled must be a boolean");
    const missing = await expectProblem(await h.request("/api/settings/forward-git", { method: "PATCH", token: t.token, json: {} }), 400, "enabled");
    expect(missing.detail).toBe("enabled is required");
    const t2 = await seedTenant(h);
    const project = await expectStatus<{ id: string }>(await h.request("/api/projects", { token: t2.token, json: { name: "words" } }), 201);
    const fraction = await h.request(`/api/projects/${project.id}/resources`, { method: "PATCH", token: t2.token, json: { port: 80.5 } });
    expect((await expectProblem(fraction, 400, "port")).detail).toBe("port must be an integer");
    const notObject = await h.request(`/api/projects/${project.id}/resources`, { method: "PATCH", token: t2.token, json: { production: 3 } });
    expect((await expectProblem(notObject, 400, "production")).detail).toBe("production must be an object");
  });
});
