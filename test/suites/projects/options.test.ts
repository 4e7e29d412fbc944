/** Build and deploy options (functions/projects/options.ts): POST /api/projects/{id}/options. */
import { describe, expect, it } from "vitest";
import { InfoSchema } from "../../../functions/projects/info";
import { OptionsSchema } from "../../../functions/projects/schema";
import { expectBody, expectProblem, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);

describe("projects: options", () => {
  it("merges build/deploy options; null clears; buildCommand is the project's", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { buildCommand: "make" });
    const opts = (json: unknown) => call(t, `/${p.id}/options`, { method: "POST", json });
    let o = await expectBody(await opts({ rootDirectory: "apps/web", installCommand: "npm ci", runtimeVersion: "22" }), 200, OptionsSchema);
    expect(o).toEqual({
      rootDirectory: "apps/web",
      installCommand: "npm ci",
      buildCommand: "make",
      startCommand: null,
      outputDirectory: null,
      runtimeVersion: "22",
      healthCheckPath: null,
    });
    o = await expectBody(
      await opts({ outputDirectory: "dist", installCommand: null, buildCommand: "npm run build", healthCheckPath: "/healthz?deep=1" }),
      200,
      OptionsSchema,
    );
    expect(o).toEqual({
      rootDirectory: "apps/web",
      installCommand: null,
      buildCommand: "npm run build",
      startCommand: null,
      outputDirectory: "dist",
      runtimeVersion: "22",
      healthCheckPath: "/healthz?deep=1",
    });
    expect((await get(t, p.id)).buildCommand).toBe("npm run build");
    expect(await expectBody(await opts({}), 200, OptionsSchema)).toEqual(o);
  });

  it("validates each option", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const cases: Array<[unknown, string]> = [
      [{ rootDirectory: "../outside" }, "rootDirectory"],
      [{ rootDirectory: "/abs" }, "rootDirectory"],
      [{ outputDirectory: "a/../../b" }, "outputDirectory"],
      [{ startCommand: "" }, "startCommand"],
      [{ startCommand: "a\nb" }, "startCommand"],
      [{ installCommand: "x".repeat(1025) }, "installCommand"],
      [{ runtimeVersion: "22; rm -rf /" }, "runtimeVersion"],
      [{ nodeVersion: "22" }, "nodeVersion"],
      [{ healthCheckPath: "healthz" }, "healthCheckPath"],
      [{ healthCheckPath: "/a b" }, "healthCheckPath"],
      [{ healthCheckPath: "/ok\r\nHost: evil" }, "healthCheckPath"],
      [{ healthCheckPath: `/${"x".repeat(256)}` }, "healthCheckPath"],
    ];
    for (const [json, field] of cases) await expectProblem(await call(t, `/${p.id}/options`, { method: "POST", json }), 400, field);
    expect((await expectBody(await call(t, `/${p.id}/info`), 200, InfoSchema)).build.options).toEqual({
      rootDirectory: null,
      installCommand: null,
      buildCommand: null,
      startCommand: null,
      outputDirectory: null,
      runtimeVersion: null,
      healthCheckPath: null,
    });
  });
});
