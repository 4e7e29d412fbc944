/** Environments (functions/projects/environments.ts): GET and POST /api/projects/{id}/environments, PATCH …/environments/{name}. */
import { describe, expect, it } from "vitest";
import { EnvironmentSchema } from "../../../functions/projects/environments";
import { expectBody, expectProblem, seedTenant } from "../../support/harness";
import { EnvironmentPage, projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);

describe("projects: environments", () => {
  it("lists production and previews; creates previews with unique names", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const env = (json: unknown) => call(t, `/${p.id}/environments`, { method: "POST", json });
    const staging = await expectBody(await env({ name: "staging", branch: "develop" }), 201, EnvironmentSchema);
    expect(staging).toMatchObject({ name: "staging", kind: "preview", branch: "develop" });
    await expectBody(await env({ name: "pr-42", branch: "feature/login" }), 201, EnvironmentSchema);
    await expectProblem(await env({ name: "staging", branch: "other" }), 409);
    await expectProblem(await env({ name: "production", branch: "main" }), 409);
    const list = await expectBody(await call(t, `/${p.id}/environments`), 200, EnvironmentPage);
    expect(list.items.map((e: { name: string }) => e.name).sort()).toEqual(["pr-42", "production", "staging"]);
    expect(list.items.map((e: { id: string }) => e.id)).toEqual(list.items.map((e: { id: string }) => e.id).sort());
    const page = await expectBody(await call(t, `/${p.id}/environments?limit=1`), 200, EnvironmentPage);
    const rest = await expectBody(await call(t, `/${p.id}/environments?limit=5&cursor=${page.nextCursor}`), 200, EnvironmentPage);
    expect([...page.items, ...rest.items]).toEqual(list.items);

    // Names are per project: another project may use the same one.
    const q = await create(t);
    await expectBody(await call(t, `/${q.id}/environments`, { method: "POST", json: { name: "staging", branch: "main" } }), 201, EnvironmentSchema);
  });

  it("validates name and branch", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const cases: Array<[unknown, string]> = [
      [{ branch: "main" }, "name"],
      [{ name: "Staging", branch: "main" }, "name"],
      [{ name: "-x", branch: "main" }, "name"],
      [{ name: "x".repeat(33), branch: "main" }, "name"],
      [{ name: "qa" }, "branch"],
      [{ name: "qa", branch: "a..b" }, "branch"],
      [{ name: "qa", branch: "" }, "branch"],
      [{ name: "qa", branch: "main", kind: "production" }, "kind"],
    ];
    for (const [json, field] of cases) await expectProblem(await call(t, `/${p.id}/environments`, { method: "POST", json }), 400, field);
  });

  it("autoRollback: on for production and off for previews unless set; PATCH changes it; bad input is a 400 naming the field, another's project or an unknown environment a 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const list = async () =>
      (await expectBody(await call(t, `/${p.id}/environments`), 200, EnvironmentPage)).items as Array<{ name: string; autoRollback: boolean }>;
    const preview = await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "qa", branch: "main" } }), 201, EnvironmentSchema);
    expect(preview.autoRollback).toBe(false);
    const guarded = await expectBody(
      await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "rc", branch: "main", autoRollback: true } }),
      201,
      EnvironmentSchema,
    );
    expect(guarded.autoRollback).toBe(true);
    expect(Object.fromEntries((await list()).map((e) => [e.name, e.autoRollback]))).toEqual({ production: true, qa: false, rc: true });

    const patch = (name: string, json: unknown, who = t) =>
      call(who, `/${p.id}/environments/${name}`, { method: "PATCH", json, token: who.token, org: who.orgId });
    expect(await expectBody(await patch("production", { autoRollback: false }), 200, EnvironmentSchema)).toMatchObject({
      name: "production",
      autoRollback: false,
    });
    expect(await expectBody(await patch("qa", { autoRollback: true }), 200, EnvironmentSchema)).toMatchObject({ name: "qa", autoRollback: true });
    expect(Object.fromEntries((await list()).map((e) => [e.name, e.autoRollback]))).toEqual({ production: false, qa: true, rc: true });

    await expectProblem(await patch("production", { autoRollback: "yes" }), 400, "autoRollback");
    await expectProblem(await patch("production", {}), 400, "autoRollback");
    await expectProblem(await patch("production", { autoRollback: true, branch: "x" }), 400, "branch");
    await expectProblem(await patch("nope", { autoRollback: true }), 404);
    await expectProblem(await patch("Bad_Name", { autoRollback: true }), 400, "name");
    const stranger = await seedTenant(h);
    await expectProblem(await patch("production", { autoRollback: true }, stranger), 404);
    expect((await list()).find((e) => e.name === "production")!.autoRollback).toBe(false);
  });
});
