/**
 * Projects core: create, list, read, update, status, routing, resources, options,
 * environments, clone token, domains, deployments, deployment sessions, info, deletion.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { apiTokens, deployments, domains, environments, envVars, projects } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { expectProblem, expectStatus, seedMember, seedTenant, eventually } from "../../support/harness";
import { projectHelpers, type Project } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get, addDeployment } = projectHelpers(h);

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

    const envs = await expectStatus(await call(t, `/${p.id}/environments`), 200);
    expect(envs.items).toEqual([expect.objectContaining({ name: "production", kind: "production", branch: null })]);
    expect((await expectStatus(await call(t, `/${p.id}/deployments`), 200)).items).toEqual([]);
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
    expect((await expectStatus(await call(t, ""), 200)).items).toEqual([]);
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

    const renamed = await expectStatus(await call(a, `/${first.id}`, { method: "PATCH", json: { name: "Renamed" } }), 200);
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
      const all = await expectStatus(await call(t, base), 200);
      expect(all.items).toHaveLength(3);
      expect(all.items[0]).toEqual(await get(t, made[0]!.id));
      expect(all.items[0].location).toMatch(/^(cloud|self-hosted)$/);
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
    expect((await expectStatus(await call(viewer, ""), 200)).items).toHaveLength(1);
    await get(viewer, p.id);
    const scoped = await seedMember(h, t.orgId, "member", { scopes: ["project:read"] });
    await expectProblem(await call(scoped, ""), 403);
    await expectProblem(await call(scoped, "/home"), 403);
  });
});

describe("projects: update", () => {
  it("changes only the sent fields; null clears an optional field", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { name: "orig", gitOwner: "acme", gitRepo: "web", buildCommand: "make" });
    const patch = (json: unknown) => call(t, `/${p.id}`, { method: "PATCH", json });
    let v = await expectStatus(await patch({ framework: "vite" }), 200);
    expect(v).toMatchObject({ name: "orig", framework: "vite", gitOwner: "acme", gitRepo: "web", buildCommand: "make" });
    v = await expectStatus(await patch({ gitBranch: "dev", buildCommand: null, gitOwner: null }), 200);
    expect(v).toMatchObject({ gitBranch: "dev", buildCommand: null, gitOwner: null, gitRepo: "web", framework: "vite" });
    expect(await expectStatus(await patch({}), 200)).toMatchObject({ gitBranch: "dev", name: "orig" });
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
    expect(await expectStatus(await call(t, `/${p.id}/resources`), 200)).toMatchObject({
      port: 8080,
      production: { memoryMb: 1024, cpuCores: 1 },
      sleepMode: "always_on",
    });
    const info = await expectStatus(await call(t, `/${p.id}/info`), 200);
    expect(info.build.options).toMatchObject({ installCommand: "pnpm i", rootDirectory: "apps/web", buildCommand: "pnpm build" });
  });
});

describe("projects: status and routing", () => {
  it("disable and enable toggle the status and the free route; repeating either is harmless", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const disabled = await expectStatus(await call(t, `/${p.id}/disable`, { method: "POST" }), 200);
    expect(disabled).toMatchObject({ status: "disabled", routes: { free: { state: "offline" } } });
    expect(disabled.disabledAt).toEqual(expect.any(String));
    const again = await expectStatus(await call(t, `/${p.id}/disable`, { method: "POST" }), 200);
    expect(again).toEqual(disabled);

    const enabled = await expectStatus(await call(t, `/${p.id}/enable`, { method: "POST" }), 200);
    expect(enabled).toMatchObject({ status: "created", disabledAt: null, routes: { free: { state: "synced" } } });
    const enabledAgain = await expectStatus(await call(t, `/${p.id}/enable`, { method: "POST", json: {} }), 200);
    expect(enabledAgain).toEqual(enabled);
  });

  it("a ready production deployment makes the project live; disable and enable keep that history", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await addDeployment(p, "failed");
    expect((await get(t, p.id)).status).toBe("created");
    const ready = await addDeployment(p, "ready");
    const failed = await addDeployment(p, "failed");
    const live = await get(t, p.id);
    expect(live.status).toBe("live");
    expect(live.latestDeployment).toMatchObject({ id: failed.id, status: "failed" });
    expect((await expectStatus(await call(t, `/${p.id}/disable`, { method: "POST" }), 200)).status).toBe("disabled");
    expect((await expectStatus(await call(t, `/${p.id}/enable`, { method: "POST" }), 200)).status).toBe("live");
    const info = await expectStatus(await call(t, `/${p.id}/info`), 200);
    expect(info.runtime.serving.id).toBe(ready.id);
  });

  it("a ready preview deployment alone does not make the project live", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201);
    await addDeployment(p, "ready", "staging");
    expect((await get(t, p.id)).status).toBe("created");
  });

  it("routing/retry re-syncs the free route and records the attempt, without a build; 409 while disabled", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const before = Date.now();
    const route = await expectStatus(await call(t, `/${p.id}/routing/retry`, { method: "POST" }), 200);
    expect(route).toMatchObject({ hostname: p.routes.free.hostname, state: "synced" });
    expect(new Date(route.lastAttemptAt).getTime()).toBeGreaterThanOrEqual(before - 5000);
    expect(route.syncedAt).toBe(route.lastAttemptAt);
    expect((await get(t, p.id)).routes.free).toEqual(route);
    const [row] = await h.db.select().from(projects).where(eq(projects.id, p.id));
    expect(row!.routingHost).toBe(p.routes.free.hostname);
    expect(await h.db.select().from(deployments).where(eq(deployments.projectId, p.id))).toEqual([]);

    // A host synced under another shared domain reads pending until retried.
    await h.db
      .update(projects)
      .set({ routingHost: `${p.slug}.old-domain.test` })
      .where(eq(projects.id, p.id));
    expect((await get(t, p.id)).routes.free.state).toBe("pending");
    expect((await expectStatus(await call(t, `/${p.id}/routing/retry`, { method: "POST" }), 200)).state).toBe("synced");

    await expectStatus(await call(t, `/${p.id}/disable`, { method: "POST" }), 200);
    await expectProblem(await call(t, `/${p.id}/routing/retry`, { method: "POST" }), 409);
    expect((await get(t, p.id)).routes.free.state).toBe("offline");
  });

  it("enable, disable and routing/retry need project:write", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const viewer = await seedMember(h, t.orgId, "viewer");
    for (const path of ["enable", "disable", "routing/retry"]) await expectProblem(await call(viewer, `/${p.id}/${path}`, { method: "POST" }), 403);
    expect((await get(t, p.id)).status).toBe("created");
  });
});

describe("projects: resources", () => {
  const DEFAULTS = { production: { cpuCores: 1, memoryMb: 512 }, build: { cpuCores: 2, memoryMb: 2048 }, diskGb: 10, sleepMode: "auto_sleep", port: 3000 };

  it("reads the defaults; PATCH and POST change only what is sent", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect(await expectStatus(await call(t, `/${p.id}/resources`), 200)).toEqual(DEFAULTS);
    const a = await expectStatus(await call(t, `/${p.id}/resources`, { method: "PATCH", json: { production: { memoryMb: 2048 } } }), 200);
    expect(a).toEqual({ ...DEFAULTS, production: { cpuCores: 1, memoryMb: 2048 } });
    const b = await expectStatus(
      await call(t, `/${p.id}/resources`, { method: "POST", json: { production: { cpuCores: 4 }, build: { memoryMb: 4096 }, diskGb: 20, port: 8080 } }),
      200,
    );
    expect(b).toEqual({ production: { cpuCores: 4, memoryMb: 2048 }, build: { cpuCores: 2, memoryMb: 4096 }, diskGb: 20, sleepMode: "auto_sleep", port: 8080 });
    const c = await expectStatus(await call(t, `/${p.id}/resources`, { method: "POST", json: { production: { cpuCores: 0.5 }, sleepMode: "always_on" } }), 200);
    expect(c).toMatchObject({ production: { cpuCores: 0.5, memoryMb: 2048 }, sleepMode: "always_on" });
    expect(await expectStatus(await call(t, `/${p.id}/resources`, { method: "PATCH", json: {} }), 200)).toEqual(c);
    expect(await expectStatus(await call(t, `/${p.id}/resources`), 200)).toEqual(c);
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
    expect(await expectStatus(await call(t, `/${p.id}/resources`), 200)).toEqual(DEFAULTS);
  });

  it("sleep-mode sets auto_sleep or always_on, else 400 naming the allowed values", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect((await expectStatus(await call(t, `/${p.id}/sleep-mode`, { method: "POST", json: { sleepMode: "always_on" } }), 200)).sleepMode).toBe("always_on");
    expect((await expectStatus(await call(t, `/${p.id}/sleep-mode`, { method: "POST", json: { sleepMode: "auto_sleep" } }), 200)).sleepMode).toBe("auto_sleep");
    for (const json of [{ sleepMode: "sometimes" }, { sleepMode: null }, {}]) {
      const problem = await expectProblem(await call(t, `/${p.id}/sleep-mode`, { method: "POST", json }), 400, "sleepMode");
      if ("sleepMode" in json && json.sleepMode === "sometimes") {
        expect(problem.allowed).toEqual(["auto_sleep", "always_on"]);
        expect(problem.detail).toContain("always_on");
      }
    }
    expect((await expectStatus(await call(t, `/${p.id}/resources`), 200)).sleepMode).toBe("auto_sleep");
  });
});

describe("projects: options", () => {
  it("merges build/deploy options; null clears; buildCommand is the project's", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { buildCommand: "make" });
    const opts = (json: unknown) => call(t, `/${p.id}/options`, { method: "POST", json });
    let o = await expectStatus(await opts({ rootDirectory: "apps/web", installCommand: "npm ci", runtimeVersion: "22" }), 200);
    expect(o).toEqual({
      rootDirectory: "apps/web",
      installCommand: "npm ci",
      buildCommand: "make",
      startCommand: null,
      outputDirectory: null,
      runtimeVersion: "22",
    });
    o = await expectStatus(await opts({ outputDirectory: "dist", installCommand: null, buildCommand: "npm run build" }), 200);
    expect(o).toEqual({
      rootDirectory: "apps/web",
      installCommand: null,
      buildCommand: "npm run build",
      startCommand: null,
      outputDirectory: "dist",
      runtimeVersion: "22",
    });
    expect((await get(t, p.id)).buildCommand).toBe("npm run build");
    expect(await expectStatus(await opts({}), 200)).toEqual(o);
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
    ];
    for (const [json, field] of cases) await expectProblem(await call(t, `/${p.id}/options`, { method: "POST", json }), 400, field);
    expect((await expectStatus(await call(t, `/${p.id}/info`), 200)).build.options).toEqual({
      rootDirectory: null,
      installCommand: null,
      buildCommand: null,
      startCommand: null,
      outputDirectory: null,
      runtimeVersion: null,
    });
  });
});

describe("projects: environments", () => {
  it("lists production and previews; creates previews with unique names", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const env = (json: unknown) => call(t, `/${p.id}/environments`, { method: "POST", json });
    const staging = await expectStatus(await env({ name: "staging", branch: "develop" }), 201);
    expect(staging).toMatchObject({ name: "staging", kind: "preview", branch: "develop" });
    await expectStatus(await env({ name: "pr-42", branch: "feature/login" }), 201);
    await expectProblem(await env({ name: "staging", branch: "other" }), 409);
    await expectProblem(await env({ name: "production", branch: "main" }), 409);
    const list = await expectStatus(await call(t, `/${p.id}/environments`), 200);
    expect(list.items.map((e: { name: string }) => e.name).sort()).toEqual(["pr-42", "production", "staging"]);
    expect(list.items.map((e: { id: string }) => e.id)).toEqual(list.items.map((e: { id: string }) => e.id).sort());
    const page = await expectStatus(await call(t, `/${p.id}/environments?limit=1`), 200);
    const rest = await expectStatus(await call(t, `/${p.id}/environments?limit=5&cursor=${page.nextCursor}`), 200);
    expect([...page.items, ...rest.items]).toEqual(list.items);

    // Names are per project: another project may use the same one.
    const q = await create(t);
    await expectStatus(await call(t, `/${q.id}/environments`, { method: "POST", json: { name: "staging", branch: "main" } }), 201);
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
});

describe("projects: clone token", () => {
  it("sets, replaces and clears it, returning only hasToken and setAt; needs project:admin to write", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect(await expectStatus(await call(t, `/${p.id}/clone-token`), 200)).toEqual({ hasToken: false, setAt: null });
    const set = await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_first_value" } }), 200);
    expect(set).toEqual({ hasToken: true, setAt: expect.any(String) });
    const member = await seedMember(h, t.orgId, "member");
    await expectProblem(await call(member, `/${p.id}/clone-token`, { method: "PATCH", json: { token: null } }), 403);
    expect(await expectStatus(await call(member, `/${p.id}/clone-token`), 200)).toEqual(set);
    await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_second_value" } }), 200);
    const [row] = await h.db.select().from(projects).where(eq(projects.id, p.id));
    const ctx = { orgId: t.orgId, table: "projects", column: "clone_token", rowId: p.id };
    expect(row!.cloneTokenCiphertext).toMatch(/^v1\./);
    expect(await h.keyring.decrypt(row!.cloneTokenCiphertext!, ctx)).toBe("ghp_second_value");
    await expect(h.keyring.decrypt(row!.cloneTokenCiphertext!, { ...ctx, rowId: "prj_other" })).rejects.toThrow();
    expect(await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: null } }), 200)).toEqual({
      hasToken: false,
      setAt: null,
    });
    for (const json of [{}, { token: "" }, { token: 5 }, { token: "x", asDefault: true }]) {
      await expectProblem(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json }), 400);
    }
  });
});

describe("projects: connect", () => {
  const host = (label: string) => `${label}-${newId("d").slice(-10)}.example.com`;

  it("adds the domain as primary; an earlier primary stays, not primary; repeating is harmless", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const a = host("a");
    const b = host("b");
    const connect = (domain: string) => call(t, `/${p.id}/connect`, { method: "POST", json: { domain } });
    let v = await expectStatus(await connect(a), 200);
    expect(v.routes.domains).toEqual([{ hostname: a, primary: true, createdAt: expect.any(String) }]);
    v = await expectStatus(await connect(`${b.toUpperCase()}.`), 200);
    expect(v.routes.domains.map((d: { hostname: string; primary: boolean }) => [d.hostname, d.primary])).toEqual([
      [b, true],
      [a, false],
    ]);
    v = await expectStatus(await connect(a), 200);
    expect(v.routes.domains.map((d: { hostname: string; primary: boolean }) => [d.hostname, d.primary])).toEqual([
      [a, true],
      [b, false],
    ]);
    v = await expectStatus(await connect(a), 200);
    expect(v.routes.domains).toHaveLength(2);
    expect((await get(t, p.id)).routes.domains).toEqual(v.routes.domains);
  });

  it("a domain of another project, in any organization, is 409", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const mine = await create(t);
    const sibling = await create(t);
    const theirs = await create(other);
    const d = host("taken");
    await expectStatus(await call(other, `/${theirs.id}/connect`, { method: "POST", json: { domain: d } }), 200);
    await expectProblem(await call(t, `/${mine.id}/connect`, { method: "POST", json: { domain: d } }), 409);
    const e = host("sib");
    await expectStatus(await call(t, `/${sibling.id}/connect`, { method: "POST", json: { domain: e } }), 200);
    await expectProblem(await call(t, `/${mine.id}/connect`, { method: "POST", json: { domain: e } }), 409);
    expect((await get(t, mine.id)).routes.domains).toEqual([]);
  });

  it("validates the hostname", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const bad = [
      "",
      "localhost",
      "https://a.example.com",
      "a.example.com/path",
      "a.example.com:8080",
      "*.example.com",
      "1.2.3.4",
      "a_b.example.com",
      "-a.example.com",
      "a..example.com",
      "exämple.com",
      `${"a".repeat(64)}.com`,
      `${"a.".repeat(130)}com`,
    ];
    for (const domain of bad) await expectProblem(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain } }), 400, "domain");
    await expectProblem(await call(t, `/${p.id}/connect`, { method: "POST", json: {} }), 400, "domain");
    // Hosts under the shared domain are free routes.
    await expectProblem(
      await call(t, `/${p.id}/connect`, { method: "POST", json: { domain: `other.${p.routes.free.hostname.split(".").slice(1).join(".")}` } }),
      400,
      "domain",
    );
    await expectStatus(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain: `xn--bcher-kva-${newId("d").slice(-6)}.example` } }), 200);
  });

  it("concurrent connects to one project leave exactly one primary", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const hosts = Array.from({ length: 6 }, (_, i) => host(`c${i}`));
    const results = await Promise.all(hosts.map((domain) => call(t, `/${p.id}/connect`, { method: "POST", json: { domain } })));
    for (const r of results) await expectStatus(r, 200);
    const rows = await h.db.select().from(domains).where(eq(domains.projectId, p.id));
    expect(rows).toHaveLength(6);
    expect(rows.filter((r) => r.isPrimary)).toHaveLength(1);
  });
});

describe("projects: deployments and sessions", () => {
  it("lists deployments newest first, paginated, optionally per environment", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201);
    const made = [await addDeployment(p, "ready"), await addDeployment(p, "failed", "staging"), await addDeployment(p, "building")];
    const first = await expectStatus(await call(t, `/${p.id}/deployments?limit=2`), 200);
    expect(first.items.map((d: { id: string }) => d.id)).toEqual([made[2]!.id, made[1]!.id]);
    expect(first.items[0]).toMatchObject({ environment: "production", status: "building", branch: "main", commitSha: "a".repeat(40), finishedAt: null });
    const second = await expectStatus(await call(t, `/${p.id}/deployments?limit=2&cursor=${first.nextCursor}`), 200);
    expect(second).toEqual({ items: [expect.objectContaining({ id: made[0]!.id })], nextCursor: null });
    const staging = await expectStatus(await call(t, `/${p.id}/deployments?environment=staging`), 200);
    expect(staging.items.map((d: { id: string }) => d.id)).toEqual([made[1]!.id]);
    expect((await expectStatus(await call(t, `/${p.id}/deployments?environment=nope`), 200)).items).toEqual([]);
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
    expect((await expectStatus(await call(session, `/${p.id}/deployments`), 200)).items).toHaveLength(1);
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
    await expectStatus(await call(t, `/${p.id}`, { method: "DELETE" }), 200);
    await expectProblem(await h.request(`/api/projects/${p.id}/deployments`, { token: full.token }), 401);
    expect(await h.db.select().from(apiTokens).where(eq(apiTokens.projectId, p.id))).toEqual([]);
  });
});

describe("projects: info", () => {
  it("assembles runtime, build and source details from what is stored", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { gitOwner: "acme", gitRepo: "shop", gitBranch: "main", framework: "nextjs" });
    await call(t, `/${p.id}/options`, { method: "POST", json: { startCommand: "npm start", runtimeVersion: "22" } });
    await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_info_secret" } });
    const d = await addDeployment(p, "ready");
    const info = await expectStatus(await call(t, `/${p.id}/info`), 200);
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
    const bare = await expectStatus(await call(t, `/${(await create(t)).id}/info`), 200);
    expect(bare.source).toMatchObject({ kind: "none", repositoryUrl: null, cloneToken: { hasToken: false, setAt: null } });
    expect(bare.runtime.serving).toBeNull();
  });
});

describe("projects: deletion", () => {
  it("the preview counts what DELETE removes; DELETE removes exactly that, then every route answers 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const keep = await create(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201);
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
    await expectStatus(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain } }), 200);
    await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_x" } }), 200);
    await addDeployment(p);
    await addDeployment(p, "failed", "staging");
    await expectStatus(await call(t, `/${p.id}/deployment-session`, { method: "POST" }), 201);

    const expected = { projects: 1, environments: 2, envVars: 3, domains: 1, deployments: 2, services: 0, cloneTokens: 1, deploymentSessions: 1 };
    const preview = await expectStatus(await call(t, `/${p.id}/deletion-preview`), 200);
    expect(preview).toEqual({ projectId: p.id, removes: expected });

    const member = await seedMember(h, t.orgId, "member");
    await expectProblem(await call(member, `/${p.id}`, { method: "DELETE" }), 403);
    const removed = await expectStatus(await call(t, `/${p.id}`, { method: "DELETE" }), 200);
    expect(removed).toEqual(preview);

    for (const table of [environments, envVars, domains, deployments]) {
      expect(await h.db.select().from(table).where(eq(table.projectId, p.id))).toEqual([]);
    }
    expect(await h.db.select().from(projects).where(eq(projects.id, p.id))).toEqual([]);
    await expectProblem(await call(t, `/${p.id}`), 404);
    await expectProblem(await call(t, `/${p.id}`, { method: "DELETE" }), 404);
    await expectProblem(await call(t, `/${p.id}/deletion-preview`), 404);
    // The other project is untouched; the domain is free again.
    expect((await expectStatus(await call(t, `/${keep.id}/env`), 200)).items).toHaveLength(1);
    await expectStatus(await call(t, `/${keep.id}/connect`, { method: "POST", json: { domain } }), 200);
  });
});
