/** Projects (functions/projects/projects.ts): PATCH /api/projects/{id}, alone and racing the other per-project writes. */
import { describe, expect, it } from "vitest";
import { InfoSchema } from "../../../functions/projects/info";
import { ProjectSchema, ResourcesSchema } from "../../../functions/projects/schema";
import { expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);

describe("projects: update", () => {
  it("changes only the sent fields; null clears an optional field", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { name: "orig", gitOwner: "acme", gitRepo: "web", buildCommand: "make" });
    const patch = (json: unknown) => call(t, `/${p.id}`, { method: "PATCH", json });
    let v = await expectBody(await patch({ framework: "vite" }), 200, ProjectSchema);
    expect(v).toMatchObject({ name: "orig", framework: "vite", gitOwner: "acme", gitRepo: "web", buildCommand: "make" });
    v = await expectBody(await patch({ gitBranch: "dev", buildCommand: null, gitOwner: null }), 200, ProjectSchema);
    expect(v).toMatchObject({ gitBranch: "dev", buildCommand: null, gitOwner: null, gitRepo: "web", framework: "vite" });
    expect(await expectBody(await patch({}), 200, ProjectSchema)).toMatchObject({ gitBranch: "dev", name: "orig" });
    expect(await get(t, p.id)).toMatchObject({ gitBranch: "dev", buildCommand: null, gitOwner: null });
  });

  it("refuses bad values and unknown fields with 400 and changes nothing", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { name: "keep" });
    const before = await get(t, p.id);
    const cases: Array<[unknown, string]> = [
      [{ name: "" }, "name"],
      [{ name: null }, "name"],
      [{ framework: null }, "framework"],
      [{ gitBranch: "x.lock" }, "gitBranch"],
      [{ name: "new", slug: "mine" }, "slug"],
      [{ name: "new", status: "live" }, "status"],
      [{ name: "new", services: [] }, "services"],
    ];
    for (const [json, field] of cases) await expectProblem(await call(t, `/${p.id}`, { method: "PATCH", json }), 400, field);
    expect(await get(t, p.id)).toEqual(before);
  });

  it("concurrent updates of different fields lose nothing", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const results = await Promise.all([
      call(t, `/${p.id}`, { method: "PATCH", json: { name: "concurrent" } }),
      call(t, `/${p.id}`, { method: "PATCH", json: { framework: "astro" } }),
      call(t, `/${p.id}`, { method: "PATCH", json: { gitBranch: "main" } }),
      call(t, `/${p.id}`, { method: "PATCH", json: { buildCommand: "pnpm build" } }),
      call(t, `/${p.id}`, { method: "PATCH", json: { gitOwner: "acme", gitRepo: "shop" } }),
      call(t, `/${p.id}/options`, { method: "POST", json: { installCommand: "pnpm i" } }),
      call(t, `/${p.id}/options`, { method: "POST", json: { rootDirectory: "apps/web" } }),
      call(t, `/${p.id}/resources`, { method: "PATCH", json: { port: 8080 } }),
      call(t, `/${p.id}/resources`, { method: "POST", json: { production: { memoryMb: 1024 } } }),
      call(t, `/${p.id}/sleep-mode`, { method: "POST", json: { sleepMode: "always_on" } }),
    ]);
    for (const r of results) await expectStatus(r, 200);
    expect(await get(t, p.id)).toMatchObject({
      name: "concurrent",
      framework: "astro",
      gitBranch: "main",
      buildCommand: "pnpm build",
      gitOwner: "acme",
      gitRepo: "shop",
    });
    expect(await expectBody(await call(t, `/${p.id}/resources`), 200, ResourcesSchema)).toMatchObject({
      port: 8080,
      production: { memoryMb: 1024, cpuCores: 1 },
      sleepMode: "always_on",
    });
    const info = await expectBody(await call(t, `/${p.id}/info`), 200, InfoSchema);
    expect(info.build.options).toMatchObject({ installCommand: "pnpm i", rootDirectory: "apps/web", buildCommand: "pnpm build" });
  });
});
