/** Resources (functions/projects/resources.ts): GET, PATCH and POST /resources, POST /sleep-mode. */
import { describe, expect, it } from "vitest";
import { ResourcesSchema } from "../../../functions/projects/schema";
import { expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);

describe("projects: resources", () => {
  const DEFAULTS = { production: { cpuCores: 1, memoryMb: 512 }, build: { cpuCores: 2, memoryMb: 2048 }, diskGb: 10, sleepMode: "auto_sleep", port: 3000 };

  it("reads the defaults; PATCH and POST change only what is sent", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect(await expectBody(await call(t, `/${p.id}/resources`), 200, ResourcesSchema)).toEqual(DEFAULTS);
    const a = await expectBody(await call(t, `/${p.id}/resources`, { method: "PATCH", json: { production: { memoryMb: 2048 } } }), 200, ResourcesSchema);
    expect(a).toEqual({ ...DEFAULTS, production: { cpuCores: 1, memoryMb: 2048 } });
    const b = await expectStatus(
      await call(t, `/${p.id}/resources`, { method: "POST", json: { production: { cpuCores: 4 }, build: { memoryMb: 4096 }, diskGb: 20, port: 8080 } }),
      200,
    );
    expect(b).toEqual({ production: { cpuCores: 4, memoryMb: 2048 }, build: { cpuCores: 2, memoryMb: 4096 }, diskGb: 20, sleepMode: "auto_sleep", port: 8080 });
    const c = await expectBody(
      await call(t, `/${p.id}/resources`, { method: "POST", json: { production: { cpuCores: 0.5 }, sleepMode: "always_on" } }),
      200,
      ResourcesSchema,
    );
    expect(c).toMatchObject({ production: { cpuCores: 0.5, memoryMb: 2048 }, sleepMode: "always_on" });
    expect(await expectBody(await call(t, `/${p.id}/resources`, { method: "PATCH", json: {} }), 200, ResourcesSchema)).toEqual(c);
    expect(await expectBody(await call(t, `/${p.id}/resources`), 200, ResourcesSchema)).toEqual(c);
  });

  it("refuses out-of-range values naming the field (PATCH and POST alike), writing nothing", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const cases: Array<[unknown, string]> = [
      [{ production: { cpuCores: 4.01 } }, "production.cpuCores"],
      [{ production: { cpuCores: 5 } }, "production.cpuCores"],
      [{ production: { cpuCores: 0 } }, "production.cpuCores"],
      [{ production: { cpuCores: -1 } }, "production.cpuCores"],
      [{ production: { cpuCores: "2" } }, "production.cpuCores"],
      [{ build: { cpuCores: 8 } }, "build.cpuCores"],
      [{ production: { memoryMb: 64 } }, "production.memoryMb"],
      [{ production: { memoryMb: 16385 } }, "production.memoryMb"],
      [{ production: { memoryMb: 512.5 } }, "production.memoryMb"],
      [{ build: { memoryMb: 100000 } }, "build.memoryMb"],
      [{ diskGb: 0 }, "diskGb"],
      [{ diskGb: 101 }, "diskGb"],
      [{ port: 0 }, "port"],
      [{ port: 65536 }, "port"],
      [{ port: "80" }, "port"],
      [{ production: { gpus: 1 } }, "production.gpus"],
      [{ production: null }, "production"],
      [{ disk: 10 }, "disk"],
      [{ port: 8080, production: { cpuCores: 9 } }, "production.cpuCores"],
    ];
    for (const method of ["PATCH", "POST"]) {
      for (const [json, field] of cases) await expectProblem(await call(t, `/${p.id}/resources`, { method, json }), 400, field);
    }
    const p5 = await expectProblem(await call(t, `/${p.id}/resources`, { method: "PATCH", json: { production: { cpuCores: 5 } } }), 400, "production.cpuCores");
    expect(p5.detail).toContain("4");
    const sm = await expectProblem(await call(t, `/${p.id}/resources`, { method: "PATCH", json: { sleepMode: "nap" } }), 400, "sleepMode");
    expect(sm.allowed).toEqual(["auto_sleep", "always_on"]);
    expect(await expectBody(await call(t, `/${p.id}/resources`), 200, ResourcesSchema)).toEqual(DEFAULTS);
  });

  it("sleep-mode sets auto_sleep or always_on, else 400 naming the allowed values", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect((await expectBody(await call(t, `/${p.id}/sleep-mode`, { method: "POST", json: { sleepMode: "always_on" } }), 200, ResourcesSchema)).sleepMode).toBe(
      "always_on",
    );
    expect(
      (await expectBody(await call(t, `/${p.id}/sleep-mode`, { method: "POST", json: { sleepMode: "auto_sleep" } }), 200, ResourcesSchema)).sleepMode,
    ).toBe("auto_sleep");
    for (const json of [{ sleepMode: "sometimes" }, { sleepMode: null }, {}]) {
      const problem = await expectProblem(await call(t, `/${p.id}/sleep-mode`, { method: "POST", json }), 400, "sleepMode");
      if ("sleepMode" in json && json.sleepMode === "sometimes") {
        expect(problem.allowed).toEqual(["auto_sleep", "always_on"]);
        expect(problem.detail).toContain("always_on");
      }
    }
    expect((await expectBody(await call(t, `/${p.id}/resources`), 200, ResourcesSchema)).sleepMode).toBe("auto_sleep");
  });
});
