/**
 * A project's connected domains (functions/projects/domains.ts): the list with
 * each domain's routing state, removal with the primary rule, and the hosts
 * connect and project creation keep for the API itself (connect.ts, slug.ts).
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../functions/app";
import { ProjectSchema } from "../../../functions/projects/schema";
import { domains } from "../../../shared/db/schema";
import type { ServiceConfig } from "../../../shared/http/context";
import { silentLogger } from "../../../shared/http/logger";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, seedMember, seedTenant, type Member } from "../../support/harness";
import { type Project, projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);

/** The shared domain of the suites' Node configuration. */
const SHARED = "apps.test";
const unique = () => newId("d").slice(-10);
const host = (label: string) => `${label}-${unique()}.example.com`;

type Listed = {
  free: { hostname: string; state: string };
  items: { hostname: string; primary: boolean; createdAt: string; routing: { state: string; checkedAt: string | null } }[];
};

const connect = async (t: Member, p: Project, domain: string) =>
  expectBody(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain } }), 200, ProjectSchema);
const list = async (t: Member, p: Project): Promise<Listed> => expectStatus(await call(t, `/${p.id}/domains`), 200);
const remove = (t: Member, p: Project, domain: string) => call(t, `/${p.id}/domains/${encodeURIComponent(domain)}`, { method: "DELETE" });
const primaries = async (t: Member, p: Project) => (await list(t, p)).items.map((d) => [d.hostname, d.primary]);

/** The app over the harness's database with another configuration (PUBLIC_URL set), reached at any URL. */
function appWith(config: Partial<ServiceConfig>) {
  const app = createApp({
    services: () => ({ db: h.db, keyring: h.keyring, config: { mode: "self-hosted", sharedDomain: SHARED, ...config } }),
    logger: silentLogger,
  });
  return (url: string, t: Member, json?: unknown) =>
    app.fetch(
      new Request(url, {
        method: json ? "POST" : "GET",
        headers: { authorization: `Bearer ${t.token}`, ...(json ? { "content-type": "application/json" } : {}) },
        body: json ? JSON.stringify(json) : undefined,
      }),
    );
}

describe("projects: domains list", () => {
  it("lists the free route and the domains, primary first then oldest first, with their routing state", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const [a, b, c] = [host("a"), host("b"), host("c")];
    for (const d of [a, b, c]) await connect(t, p, d);
    const listed = await list(t, p);
    expect(listed.free).toEqual((await get(t, p.id)).routes.free);
    expect(listed.items.map((d) => [d.hostname, d.primary])).toEqual([
      [c, true],
      [a, false],
      [b, false],
    ]);
    // The self-hosted edge routes a connected domain at once; the cloud has no edge routing it.
    const served = h.runtime !== "worker";
    for (const d of listed.items) {
      expect(Object.keys(d).sort()).toEqual(["createdAt", "hostname", "primary", "routing"]);
      expect(new Date(d.createdAt).toISOString()).toBe(d.createdAt);
      expect(d.routing.state).toBe(served ? "synced" : "pending");
      if (served) expect(new Date(d.routing.checkedAt!).toISOString()).toBe(d.routing.checkedAt);
      else expect(d.routing.checkedAt).toBeNull();
    }
    expect(listed.items.map(({ hostname, primary, createdAt }) => ({ hostname, primary, createdAt }))).toEqual(
      [...(await get(t, p.id)).routes.domains].sort((x: { primary: boolean }, y: { primary: boolean }) => Number(y.primary) - Number(x.primary)),
    );

    // A disabled project's domains are offline; enabled again, routed again.
    await expectStatus(await call(t, `/${p.id}/disable`, { method: "POST" }), 200);
    expect((await list(t, p)).items.map((d) => d.routing)).toEqual([0, 1, 2].map(() => ({ state: "offline", checkedAt: null })));
    await expectStatus(await call(t, `/${p.id}/enable`, { method: "POST" }), 200);
    expect((await list(t, p)).items.map((d) => d.routing.state)).toEqual([0, 1, 2].map(() => (served ? "synced" : "pending")));
  });

  it("a project without domains lists none", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const listed = await list(t, p);
    expect(listed.items).toEqual([]);
    expect(listed.free.hostname).toBe(p.routes.free.hostname);
  });
});

describe("projects: domain removal", () => {
  it("removing a domain that is not primary keeps the primary", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const [a, b] = [host("a"), host("b")];
    await connect(t, p, a);
    await connect(t, p, b);
    const res = await remove(t, p, a);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect(await primaries(t, p)).toEqual([[b, true]]);
    expect((await get(t, p.id)).routes.domains.map((d: { hostname: string }) => d.hostname)).toEqual([b]);
  });

  it("removing the primary makes the oldest remaining one primary; removing the last leaves none", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const [a, b, c] = [host("a"), host("b"), host("c")];
    for (const d of [a, b, c, a]) await connect(t, p, d);
    expect(await primaries(t, p)).toEqual([
      [a, true],
      [b, false],
      [c, false],
    ]);
    // The oldest left (b), not the latest connected (c).
    await expectStatus(await remove(t, p, a), 204);
    expect(await primaries(t, p)).toEqual([
      [b, true],
      [c, false],
    ]);
    await expectStatus(await remove(t, p, b), 204);
    expect(await primaries(t, p)).toEqual([[c, true]]);
    await expectStatus(await remove(t, p, c), 204);
    expect((await list(t, p)).items).toEqual([]);
    expect(await h.db.select().from(domains).where(eq(domains.projectId, p.id))).toEqual([]);
    // Removed, the hostname is free again (for this project or any other).
    const other = await create(t);
    await connect(t, other, a);
    expect(await primaries(t, other)).toEqual([[a, true]]);
  });

  it("matches the hostname in any case, with or without a trailing dot", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const [a, b] = [host("a"), host("b")];
    await connect(t, p, a);
    await connect(t, p, b);
    await expectStatus(await remove(t, p, a.toUpperCase()), 204);
    await expectStatus(await remove(t, p, `${b.replace(/^./, (x) => x.toUpperCase())}.`), 204);
    expect((await list(t, p)).items).toEqual([]);
  });

  it("another project's domain, an unknown one and a foreign project all answer 404 and change nothing", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const mine = await create(t);
    const sibling = await create(t);
    const theirs = await create(other);
    const [m, s, f] = [host("mine"), host("sib"), host("foreign")];
    await connect(t, mine, m);
    await connect(t, sibling, s);
    await connect(other, theirs, f);
    const before = await h.db.select().from(domains).where(eq(domains.hostname, m));

    const siblings = await expectProblem(await remove(t, mine, s), 404);
    const unknown = await expectProblem(await remove(t, mine, host("unknown")), 404);
    const malformed = await expectProblem(await remove(t, mine, "not a hostname"), 404);
    const tooLong = await expectProblem(await remove(t, mine, `${"a".repeat(300)}.com`), 404);
    // Another organization's domain through my project, and through its own project id.
    const foreignDomain = await expectProblem(await remove(t, mine, f), 404);
    const foreignProject = await expectProblem(await remove(t, theirs, f), 404);
    const unknownProject = await expectProblem(await call(t, `/${newId("prj")}/domains/${f}`, { method: "DELETE" }), 404);
    // One 404 for every domain that is not this project's; the project's own 404 for a project that is not the caller's.
    expect(new Set([siblings, unknown, malformed, tooLong, foreignDomain].map((p) => p.detail))).toEqual(new Set(["Domain not found"]));
    expect(foreignProject.detail).toBe(unknownProject.detail);
    await expectProblem(await call(t, `/${theirs.id}/domains`), 404);

    expect(await primaries(t, mine)).toEqual([[m, true]]);
    expect(await primaries(t, sibling)).toEqual([[s, true]]);
    expect(await primaries(other, theirs)).toEqual([[f, true]]);
    expect(await h.db.select().from(domains).where(eq(domains.hostname, m))).toEqual(before);
  });

  it("a viewer lists the domains (200) but cannot remove one (403)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const a = host("a");
    await connect(t, p, a);
    const viewer = await seedMember(h, t.orgId, "viewer");
    expect((await list(viewer, p)).items.map((d) => d.hostname)).toEqual([a]);
    await expectProblem(await remove(viewer, p, a), 403);
    expect(await primaries(t, p)).toEqual([[a, true]]);
  });

  // h is filled in beforeAll, so `it.runIf(h.realConcurrency)` would read it too early: skip at run time.
  it("concurrent removals and connects of one project leave exactly one primary, or none", async (ctx) => {
    if (!h.realConcurrency) return ctx.skip("needs a database that runs transactions concurrently");
    const t = await seedTenant(h);
    const p = await create(t);
    for (let round = 0; round < 4; round++) {
      const existing = Array.from({ length: 6 }, (_, i) => host(`r${round}e${i}`));
      for (const d of existing) await connect(t, p, d);
      const added = Array.from({ length: 4 }, (_, i) => host(`r${round}n${i}`));
      // Remove every existing domain (the primary among them) while others are connected; the first one twice.
      const statuses = await Promise.all([
        ...[existing[0]!, ...existing].map((d) => remove(t, p, d).then((r) => r.status)),
        ...added.map((d) => call(t, `/${p.id}/connect`, { method: "POST", json: { domain: d } }).then((r) => r.status)),
      ]);
      // Each removal succeeded once (the repeated one: exactly one of the two), each connect succeeded.
      expect(statuses.slice(0, 2).sort()).toEqual([204, 404]);
      expect(statuses.slice(2)).toEqual([...existing.slice(1).map(() => 204), ...added.map(() => 200)]);
      const rows = await h.db.select().from(domains).where(eq(domains.projectId, p.id));
      expect(rows.map((r) => r.hostname).sort()).toEqual([...added].sort());
      expect(rows.filter((r) => r.isPrimary)).toHaveLength(1);
      // Remove the primary and the next oldest ones at once: the oldest left becomes the one primary.
      const more = Array.from({ length: 6 }, (_, i) => host(`r${round}m${i}`));
      for (const d of more) await connect(t, p, d);
      const gone = [more[5]!, ...added, more[0]!, more[1]!];
      await Promise.all(gone.map((d) => remove(t, p, d).then((r) => expectStatus(r, 204))));
      const left = await h.db.select().from(domains).where(eq(domains.projectId, p.id));
      expect(left.map((r) => [r.hostname, r.isPrimary]).sort()).toEqual(more.slice(2, 5).map((d, i) => [d, i === 0]));
      added.splice(0, added.length, ...more.slice(2, 5));
      // Now remove them all at once: none left, none primary.
      await Promise.all(added.map((d) => remove(t, p, d).then((r) => expectStatus(r, 204))));
      expect(await h.db.select().from(domains).where(eq(domains.projectId, p.id))).toEqual([]);
    }
  });

  it("concurrent removals leave one primary on any runtime", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const hosts = Array.from({ length: 5 }, (_, i) => host(`k${i}`));
    for (const d of hosts) await connect(t, p, d);
    await Promise.all(hosts.slice(2).map((d) => remove(t, p, d).then((r) => expectStatus(r, 204))));
    const rows = await h.db.select().from(domains).where(eq(domains.projectId, p.id));
    expect(rows.map((r) => r.hostname).sort()).toEqual(hosts.slice(0, 2).sort());
    expect(rows.filter((r) => r.isPrimary).map((r) => r.hostname)).toEqual([hosts[0]]);
  });
});

describe("projects: the API's own hosts", () => {
  it("connect refuses the host the request came to (400 naming domain)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    // The harness's requests go to http://workspace.test.
    for (const domain of ["workspace.test", "WORKSPACE.test."]) {
      const problem = await expectProblem(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain } }), 400, "domain");
      expect(problem.detail).toMatch(/workspace\.test is the host this API is reached at/);
    }
    // Through another host, the same app refuses that one instead.
    const api = host("api");
    const fetchAt = appWith({});
    await expectProblem(await fetchAt(`https://${api}/api/projects/${p.id}/connect`, t, { domain: api.toUpperCase() }), 400, "domain");
    const other = host("other");
    await expectStatus(await fetchAt(`https://${api}/api/projects/${p.id}/connect`, t, { domain: other }), 200);
    expect(await primaries(t, p)).toEqual([[other, true]]);
  });

  it("connect refuses the host of PUBLIC_URL (400 naming domain)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const publicHost = host("ws");
    const fetchAt = appWith({ publicUrl: `https://${publicHost}:8443/workspace/` });
    const problem = await expectProblem(await fetchAt(`http://127.0.0.1/api/projects/${p.id}/connect`, t, { domain: `${publicHost}.` }), 400, "domain");
    expect(problem.detail).toMatch(/PUBLIC_URL/);
    // Without PUBLIC_URL the same host is an ordinary domain.
    await connect(t, p, publicHost);
    expect(await primaries(t, p)).toEqual([[publicHost, true]]);
  });

  it("a project's slug is never the PUBLIC_URL host's label under the shared domain; creation still succeeds", async () => {
    const t = await seedTenant(h);
    const label = `console${unique()}`;
    const fetchAt = appWith({ publicUrl: `https://${label}.${SHARED.toUpperCase()}` });
    const base = "http://127.0.0.1/api/projects";
    const created = await expectBody(await fetchAt(base, t, { name: label }), 201, ProjectSchema);
    expect(created.slug).toMatch(new RegExp(`^${label}-[a-z0-9]{6}$`));
    const ensured = await expectStatus(await fetchAt(`${base}/ensure`, t, { name: label.toUpperCase() }), 201);
    expect(ensured.slug).toMatch(new RegExp(`^${label}-[a-z0-9]{6}$`));
    // A preview-style label (`<slug>--<environment>`) reserves its slug part.
    const previewSlug = `pv${unique()}`;
    const viaPreview = appWith({ publicUrl: `https://${previewSlug}--api.${SHARED}` });
    expect((await expectBody(await viaPreview(base, t, { name: previewSlug }), 201, ProjectSchema)).slug).not.toBe(previewSlug);
    // Without that setting (or with a host outside the shared domain) the name is the slug.
    const free = `free${unique()}`;
    expect((await create(t, { name: free })).slug).toBe(free);
    const outside = `out${unique()}`;
    const elsewhere = appWith({ publicUrl: `https://${outside}.example.org` });
    expect((await expectBody(await elsewhere(base, t, { name: outside }), 201, ProjectSchema)).slug).toBe(outside);
  });
});

describe("projects: domains through the self-hosted edge", () => {
  // One real server (its own embedded database) is enough: the edge is the Node adapter's, the same on Postgres.
  it("a connected domain is served by the edge at once, and a removed one is the edge's 404 again at once", async (ctx) => {
    if (h.runtime !== "node-pglite") return ctx.skip("starts a real self-hosted server (Node adapter)");
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const http = await import("node:http");
    const { loadNodeConfig } = await import("../../../functions/self-hosted/config");
    const { startSelfHosted } = await import("../../../functions/self-hosted/start");
    const dir = mkdtempSync(join(tmpdir(), "ws-domains-"));
    const token = `wso_${"d".repeat(40)}`;
    const config = loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir, SHARED_DOMAIN: SHARED, RUNNER: "off", WORKSPACE_OWNER_TOKEN: token });
    const server = await startSelfHosted(config, () => {});
    try {
      const port = new URL(server.url).port;
      const api = async (method: string, path: string, json?: unknown) => {
        const res = await fetch(`${server.url}/api${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(json ? { "content-type": "application/json" } : {}) },
          body: json ? JSON.stringify(json) : undefined,
        });
        return { status: res.status, body: res.status === 204 ? null : await res.json() };
      };
      /** A request whose Host is `name`: the edge's page header (a name neither the API's nor an app's: `unknown_host`). */
      const viaHost = (name: string) =>
        new Promise<{ status: number; edge: string | undefined }>((resolve, reject) => {
          const req = http.request({ host: "127.0.0.1", port, path: "/no-such-page", headers: { host: name } }, (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode!, edge: res.headers["x-workspace-edge"] as string | undefined }));
          });
          req.on("error", reject);
          req.end();
        });
      const project = await api("POST", "/projects", { name: "edge domains" });
      expect(project.status).toBe(201);
      const id = project.body.id as string;
      const d = host("edge");
      expect(await viaHost(d)).toEqual({ status: 404, edge: "unknown_host" });
      expect((await api("POST", `/projects/${id}/connect`, { domain: d })).status).toBe(200);
      /** The edge takes a change on the database's notification: within a second (README), in practice milliseconds. */
      const within = async (expected: { status: number; edge: string | undefined }) => {
        const started = performance.now();
        let got = await viaHost(d);
        while (got.edge !== expected.edge && performance.now() - started < 1000) got = await viaHost(d);
        expect(got).toEqual(expected);
        return performance.now() - started;
      };
      // Nothing deployed: the edge's own page for the project (not the API's 404).
      const servedAfter = await within({ status: 404, edge: "not_deployed" });
      const listed = await api("GET", `/projects/${id}/domains`);
      expect(listed.body.items.map((x: { hostname: string; routing: { state: string } }) => [x.hostname, x.routing.state])).toEqual([[d, "synced"]]);
      expect((await api("DELETE", `/projects/${id}/domains/${d.toUpperCase()}`)).status).toBe(204);
      const droppedAfter = await within({ status: 404, edge: "unknown_host" });
      expect(servedAfter + droppedAfter).toBeLessThan(2000);
      // A Host that is not one of the API's names never reaches the API: connecting it "through itself" is the edge's 404.
      const refused = await new Promise<{ status: number; edge: string | undefined }>((resolve, reject) => {
        const req = http.request(
          {
            host: "127.0.0.1",
            port,
            method: "POST",
            path: `/api/projects/${id}/connect`,
            headers: { host: `${d}:${port}`, authorization: `Bearer ${token}`, "content-type": "application/json" },
          },
          (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode!, edge: res.headers["x-workspace-edge"] as string | undefined }));
          },
        );
        req.on("error", reject);
        req.end(JSON.stringify({ domain: d }));
      });
      expect(refused).toEqual({ status: 404, edge: "unknown_host" });
      expect((await api("GET", `/projects/${id}/domains`)).body.items).toEqual([]);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
