/** Projects (functions/projects/projects.ts): POST /api/projects, GET /api/projects and /api/projects/home. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ProjectPage } from "../../../functions/projects/projects";
import { ProjectSchema } from "../../../functions/projects/schema";
import { deployments } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { DeploymentPage, EnvironmentPage, projectHelpers, type Project } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);

describe("projects: create", () => {
  it("records the project with only a name, defaults the rest and deploys nothing", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { name: "My Café App!" });
    expect(p).toMatchObject({
      name: "My Café App!",
      status: "created",
      disabledAt: null,
      framework: "auto",
      buildCommand: null,
      gitProvider: null,
      gitOwner: null,
      gitRepo: null,
      gitBranch: null,
      latestDeployment: null,
      routes: { domains: [] },
    });
    expect(p.id).toMatch(/^prj_/);
    expect(p.slug).toMatch(/^my-cafe-app(-[a-z0-9]{6})?$/);
    expect(p.routes.free.hostname.startsWith(`${p.slug}.`)).toBe(true);
    expect(p.routes.free).toMatchObject({ state: "pending", lastAttemptAt: null, syncedAt: null });
    expect(await get(t, p.id)).toEqual(p);

    const envs = await expectBody(await call(t, `/${p.id}/environments`), 200, EnvironmentPage);
    expect(envs.items).toEqual([expect.objectContaining({ name: "production", kind: "production", branch: null })]);
    expect((await expectBody(await call(t, `/${p.id}/deployments`), 200, DeploymentPage)).items).toEqual([]);
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, p.id))).toEqual([]);
  });

  it("keeps the given source and build fields; gitProvider defaults to github for a repository", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { name: "src", gitOwner: "acme", gitRepo: "web", gitBranch: "release/1.2", framework: "nextjs", buildCommand: "npm run build" });
    expect(p).toMatchObject({
      gitProvider: "github",
      gitOwner: "acme",
      gitRepo: "web",
      gitBranch: "release/1.2",
      framework: "nextjs",
      buildCommand: "npm run build",
    });
    const upload = await create(t, { name: "upl", gitProvider: "upload" });
    expect(upload).toMatchObject({ gitProvider: "upload", gitOwner: null });
  });

  it("requires a non-empty name (400 naming it) and writes nothing", async () => {
    const t = await seedTenant(h);
    for (const json of [{}, { name: "" }, { name: "   " }, { name: null }, { name: 7 }, { framework: "vite" }]) {
      await expectProblem(await h.request("/api/projects", { token: t.token, json }), 400, "name");
    }
    await expectProblem(await h.request("/api/projects", { token: t.token, json: { name: "x".repeat(101) } }), 400, "name");
    expect((await expectBody(await call(t, ""), 200, ProjectPage)).items).toEqual([]);
  });

  it("refuses unknown and ensure-only fields and invalid values, naming the field", async () => {
    const t = await seedTenant(h);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ services: [] }, "services"],
      [{ projectId: "prj_x" }, "projectId"],
      [{ uploadSessionId: "s" }, "uploadSessionId"],
      [{ localPath: "/srv" }, "localPath"],
      [{ gitBranch: "a..b" }, "gitBranch"],
      [{ gitBranch: "has space" }, "gitBranch"],
      [{ gitOwner: "a/b" }, "gitOwner"],
      [{ gitRepo: ".." }, "gitRepo"],
      [{ gitProvider: "svn" }, "gitProvider"],
      [{ framework: "next js" }, "framework"],
      [{ buildCommand: "npm ci\nrm -rf /" }, "buildCommand"],
    ];
    for (const [extra, field] of cases) {
      await expectProblem(await h.request("/api/projects", { token: t.token, json: { name: "ok", ...extra } }), 400, field);
    }
    const p = await expectProblem(await h.request("/api/projects", { token: t.token, json: { name: "ok", gitProvider: "svn" } }), 400, "gitProvider");
    expect(p.allowed).toEqual(["github", "gitlab", "bitbucket", "gitea", "upload"]);
  });

  it("derives a slug unique across the deployment, reserved words included, and keeps it on rename", async () => {
    const a = await seedTenant(h);
    const b = await seedTenant(h);
    const name = `Shop ${newId("s").slice(-8)}`;
    const first = await create(a, { name });
    const second = await create(b, { name });
    expect(first.slug).toBe(name.toLowerCase().replace(" ", "-"));
    expect(second.slug).toMatch(new RegExp(`^${first.slug}-[a-z0-9]{6}$`));
    const reserved = await create(a, { name: "API" });
    expect(reserved.slug).toMatch(/^api-[a-z0-9]{6}$/);
    const symbols = await create(a, { name: "!!!" });
    expect(symbols.slug).toMatch(/^project(-[a-z0-9]{6})?$/);
    const long = await create(a, { name: "x".repeat(100) });
    expect(long.slug.length).toBeLessThanOrEqual(47);

    const renamed = await expectBody(await call(a, `/${first.id}`, { method: "PATCH", json: { name: "Renamed" } }), 200, ProjectSchema);
    expect(renamed).toMatchObject({ name: "Renamed", slug: first.slug });
  });

  it("needs project:write", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectProblem(await h.request("/api/projects", { token: viewer.token, json: { name: "v" } }), 403);
    const member = await seedMember(h, t.orgId, "member");
    await expectStatus(await h.request("/api/projects", { token: member.token, json: { name: "m" } }), 201);
  });
});

describe("projects: lists", () => {
  it("pages the organization's projects oldest first with a stable cursor, home included", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    await create(other);
    // Oldest first = id order (ids sort by creation millisecond).
    const made = [await create(t), await create(t), await create(t)].sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const base of ["", "/home"]) {
      const first = await expectStatus(await call(t, `${base}?limit=2`), 200);
      expect(first.items.map((p: Project) => p.id)).toEqual(made.slice(0, 2).map((p) => p.id));
      expect(first.nextCursor).toEqual(expect.any(String));
      const second = await expectStatus(await call(t, `${base}?limit=2&cursor=${encodeURIComponent(first.nextCursor)}`), 200);
      expect(second.items.map((p: Project) => p.id)).toEqual([made[2]!.id]);
      expect(second.nextCursor).toBeNull();
      const all = await expectBody(await call(t, base), 200, ProjectPage);
      expect(all.items).toHaveLength(3);
      expect(all.items[0]).toEqual(await get(t, made[0]!.id));
      expect(all.items[0]!.location).toMatch(/^(cloud|self-hosted)$/);
    }
    await expectProblem(await call(t, "?limit=0"), 400, "limit");
    await expectProblem(await call(t, "?limit=101"), 400, "limit");
    await expectProblem(await call(t, "/home?limit=abc"), 400, "limit");
    await expectProblem(await call(t, "?bogus=1"), 400, "bogus");
  });

  it("a viewer can list and read; a token without project:list cannot list", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const viewer = await seedMember(h, t.orgId, "viewer");
    expect((await expectBody(await call(viewer, ""), 200, ProjectPage)).items).toHaveLength(1);
    await get(viewer, p.id);
    const scoped = await seedMember(h, t.orgId, "member", { scopes: ["project:read"] });
    await expectProblem(await call(scoped, ""), 403);
    await expectProblem(await call(scoped, "/home"), 403);
  });
});
