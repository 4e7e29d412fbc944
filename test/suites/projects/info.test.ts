/** Info (functions/projects/info.ts): GET /api/projects/{id}/info. */
import { describe, expect, it } from "vitest";
import { InfoSchema } from "../../../functions/projects/info";
import { expectBody, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, addDeployment } = projectHelpers(h);

describe("projects: info", () => {
  it("assembles runtime, build and source details from what is stored", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { gitOwner: "acme", gitRepo: "shop", gitBranch: "main", framework: "nextjs" });
    await call(t, `/${p.id}/options`, { method: "POST", json: { startCommand: "npm start", runtimeVersion: "22" } });
    await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_info_secret" } });
    const d = await addDeployment(p, "ready");
    const info = await expectBody(await call(t, `/${p.id}/info`), 200, InfoSchema);
    expect(info).toMatchObject({
      id: p.id,
      runtime: {
        status: "live",
        resources: { production: { cpuCores: 1, memoryMb: 512 }, port: 3000, sleepMode: "auto_sleep", diskGb: 10 },
        freeRoute: { hostname: p.routes.free.hostname, state: "pending" },
        primaryDomain: null,
        runtimeVersion: "22",
        startCommand: "npm start",
        serving: { id: d.id, status: "ready" },
      },
      build: { framework: "nextjs", lastDeployment: { id: d.id } },
      source: {
        kind: "git",
        provider: "github",
        owner: "acme",
        repo: "shop",
        branch: "main",
        repositoryUrl: "https://github.com/acme/shop",
        cloneToken: { hasToken: true },
      },
    });
    expect(JSON.stringify(info)).not.toContain("ghp_info_secret");
    const bare = await expectBody(await call(t, `/${(await create(t)).id}/info`), 200, InfoSchema);
    expect(bare.source).toMatchObject({ kind: "none", repositoryUrl: null, cloneToken: { hasToken: false, setAt: null } });
    expect(bare.runtime.serving).toBeNull();
  });
});
