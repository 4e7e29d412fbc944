/** Info (functions/projects/info.ts): GET /api/projects/{id}/info; the source as GET /api/projects/{id} names it too. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { InfoSchema } from "../../../functions/projects/info";
import { ProjectPage } from "../../../functions/projects/projects";
import { ProjectSchema } from "../../../functions/projects/schema";
import { projects } from "../../../shared/db/schema";
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

  it("names the source in GET /api/projects/{id} and /info: the repository and branch, an upload, a local folder, or none", async () => {
    const t = await seedTenant(h);
    const read = async (id: string) => ({
      project: await expectBody(await call(t, `/${id}`), 200, ProjectSchema),
      info: await expectBody(await call(t, `/${id}/info`), 200, InfoSchema),
    });

    const git = await create(t, { gitOwner: "acme", gitRepo: "shop", gitBranch: "release" });
    const fromGit = await read(git.id);
    expect(fromGit.project.source).toEqual({
      kind: "git",
      repository: { provider: "github", owner: "acme", repo: "shop", branch: "release" },
      localPath: null,
    });
    expect(fromGit.info.source).toMatchObject({ kind: "git", owner: "acme", repo: "shop", branch: "release", localPath: null });

    const upload = await create(t, { gitProvider: "upload" });
    const fromUpload = await read(upload.id);
    expect(fromUpload.project.source).toEqual({ kind: "upload", repository: null, localPath: null });
    expect(fromUpload.info.source).toMatchObject({ kind: "upload", repositoryUrl: null, localPath: null });

    // A local folder is imported on a self-hosted server (test/node/local-folders.test.ts); the read is the same on every runtime.
    const local = await create(t);
    await h.db.update(projects).set({ localPath: "/srv/apps/site" }).where(eq(projects.id, local.id));
    const fromLocal = await read(local.id);
    expect(fromLocal.project.source).toEqual({ kind: "local", repository: null, localPath: "/srv/apps/site" });
    expect(fromLocal.info.source).toMatchObject({ kind: "local", localPath: "/srv/apps/site" });
    // The list answers it too.
    const listed = await expectBody(await h.request("/api/projects?limit=100", { token: t.token }), 200, ProjectPage);
    expect(listed.items.find((p) => p.id === local.id)?.source.kind).toBe("local");

    const none = await read((await create(t)).id);
    expect(none.project.source).toEqual({ kind: "none", repository: null, localPath: null });
    expect(none.info.source.kind).toBe("none");
  });
});
