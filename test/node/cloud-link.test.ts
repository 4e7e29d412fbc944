/**
 * A self-hosted instance (the Node adapter on PGlite) linked to the cloud (the real
 * Worker in workerd over HTTP on loopback, its own Postgres): the link routes and
 * CLOUD_TOKEN, the merged home feed, and the forwarding of cloud projects'
 * per-project routes (JSON, SSE, problems, the stub forgotten when the cloud deletes
 * the project). The instance reaches the cloud with the global fetch, as in production.
 */
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CloudLinkSchema } from "../../functions/cloud/link";
import { linkFromEnvironment } from "../../functions/cloud/link-service";
import { ProjectSchema } from "../../functions/projects/schema";
import { cloudLinks, cloudProjects } from "../../shared/db/schema";
import { jsonLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { closedLoopbackUrl, homeFeed, homePage, lateRelay, linkInstance, median, pointLinkAt } from "../support/cloud-link";
import { useCloudWorker } from "../support/cloud-worker";
import {
  dumpAllTables,
  eventually,
  expectBody,
  expectProblem,
  expectStatus,
  type Harness,
  type Member,
  seedMember,
  seedTenant,
  useHarness,
} from "../support/harness";
import { openPgliteHarness, pgliteHarness } from "../support/node-harness";
import { envTools, MASK, type Project, projectHelpers } from "../support/projects";
import { lineSeeder, SseReader } from "../suites/logs/support";

const sh = useHarness(pgliteHarness);
const cloud = useCloudWorker();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A project made through the cloud's own API. */
async function cloudProject(owner: Member, name = `cloud ${newId("n")}`): Promise<Project> {
  return (await expectBody(await cloud.request("/api/projects", { token: owner.token, org: owner.orgId, json: { name } }), 201, ProjectSchema)) as Project;
}

/** A project made on the instance. */
const localProject = (owner: Member) => projectHelpers(sh).create(owner);

/** An instance organization linked to a fresh cloud organization. */
async function linkedPair() {
  const shOwner = await seedTenant(sh);
  const cloudOwner = await cloud.seedTenant();
  await linkInstance(sh, shOwner, cloud, cloudOwner);
  return { shOwner, cloudOwner };
}

/** Requests the cloud received for a path (its request log lines). */
const cloudCalls = (fragment: string) => cloud.logs.filter((l) => l.includes('"request"') && l.includes(fragment)).length;

describe("the cloud link routes", () => {
  it("links with a good token (never stored or shown in the clear), refuses bad input, is per organization, and unlinks", async () => {
    const shOwner = await seedTenant(sh);
    const cloudOwner = await cloud.seedTenant();
    const canary = cloudOwner.token;
    const bodies: string[] = [];
    const call = async (member: Member, method: string, json?: unknown) => {
      const res = await sh.request("/api/cloud/link", { method, token: member.token, org: member.orgId, json });
      const text = await res.clone().text();
      bodies.push(text);
      return res;
    };

    // A refused token: 400 naming `token`; nothing stored.
    await expectProblem(await call(shOwner, "PUT", { apiUrl: cloud.url, token: `wsp_${"x".repeat(40)}` }), 400, "token");
    // Nothing listens there: 400 naming `apiUrl`.
    await expectProblem(await call(shOwner, "PUT", { apiUrl: await closedLoopbackUrl(), token: canary }), 400, "apiUrl");
    // A member (no org:admin) may not link; a viewer may read.
    const member = await seedMember(sh, shOwner.orgId, "member");
    const viewer = await seedMember(sh, shOwner.orgId, "viewer");
    await expectProblem(await call(member, "PUT", { apiUrl: cloud.url, token: canary }), 403);
    expect(await expectBody(await call(viewer, "GET"), 200, CloudLinkSchema)).toMatchObject({ linked: false, cloudOrganization: null, tokenHint: null });

    // The good token, with the cloud organization left to the token's default.
    const linked = await expectBody(await call(shOwner, "PUT", { apiUrl: cloud.url, token: canary }), 200, CloudLinkSchema);
    const [cloudOrg] = await cloud.db
      .execute<{ name: string }>(`select name from organizations where id = '${cloudOwner.orgId}'` as never)
      .then((r) => (r as unknown as { rows: Array<{ name: string }> }).rows);
    expect(linked).toMatchObject({
      linked: true,
      apiUrl: cloud.url,
      cloudOrganization: { id: cloudOwner.orgId, name: cloudOrg!.name },
      tokenHint: `…${canary.slice(-4)}`,
      setBy: "api",
    });
    const read = await expectBody(await call(viewer, "GET"), 200, CloudLinkSchema);
    expect(read).toEqual(linked);

    // Per organization: another organization of the instance is not linked.
    const other = await seedTenant(sh);
    expect(await expectBody(await call(other, "GET"), 200, CloudLinkSchema)).toMatchObject({ linked: false });
    expect((await homePage(sh, other)).cloud).toBeUndefined();

    // The token is nowhere in the clear: not in any answer, the instance's log lines, or any table.
    const [row] = await sh.db.select().from(cloudLinks).where(eq(cloudLinks.orgId, shOwner.orgId));
    expect(row!.tokenCiphertext).not.toContain(canary);
    expect(row!.tokenHint).toBe(canary.slice(-4));
    expect(await sh.keyring.decrypt(row!.tokenCiphertext, { orgId: shOwner.orgId, table: "cloud_links", column: "token", rowId: shOwner.orgId })).toBe(canary);
    expect(bodies.join("\n")).not.toContain(canary);
    expect(sh.logs.join("\n")).not.toContain(canary);
    expect(await dumpAllTables(sh)).not.toContain(canary);

    // Unlink: 204, then linked: false; a second DELETE has nothing to remove.
    expect((await call(member, "DELETE")).status).toBe(403);
    expect((await call(shOwner, "DELETE")).status).toBe(204);
    expect(await expectBody(await call(viewer, "GET"), 200, CloudLinkSchema)).toMatchObject({ linked: false, apiUrl: null });
    await expectProblem(await call(shOwner, "DELETE"), 404);
    expect(await sh.db.select().from(cloudLinks).where(eq(cloudLinks.orgId, shOwner.orgId))).toEqual([]);
    expect((await homePage(sh, shOwner)).cloud).toBeUndefined();
  });

  it("CLOUD_API_URL + CLOUD_TOKEN link the instance's first organization; the API then may not change or remove it", async () => {
    // An instance of its own: the organization seeded first is the instance's first.
    const fresh: Harness = await openPgliteHarness();
    try {
      const first = await seedTenant(fresh);
      await sleep(2);
      const second = await seedTenant(fresh);
      const cloudOwner = await cloud.seedTenant();
      const lines: string[] = [];
      const env = linkFromEnvironment(
        fresh.db,
        fresh.keyring,
        { apiUrl: cloud.url, token: cloudOwner.token },
        jsonLogger((l) => lines.push(l)),
        100,
      );
      try {
        const link = await eventually(
          async () =>
            expectBody(await fresh.request("/api/cloud/link", { token: first.token, org: first.orgId }), 200, CloudLinkSchema).then((l) => {
              if (!l.linked) throw new Error("not linked yet");
              return l;
            }),
          10_000,
        );
        expect(link).toMatchObject({
          linked: true,
          setBy: "environment",
          cloudOrganization: { id: cloudOwner.orgId },
          tokenHint: `…${cloudOwner.token.slice(-4)}`,
        });
        expect(await expectBody(await fresh.request("/api/cloud/link", { token: second.token, org: second.orgId }), 200, CloudLinkSchema)).toMatchObject({
          linked: false,
        });
        await expectProblem(
          await fresh.request("/api/cloud/link", { method: "PUT", token: first.token, org: first.orgId, json: { apiUrl: cloud.url, token: cloudOwner.token } }),
          409,
        );
        await expectProblem(await fresh.request("/api/cloud/link", { method: "DELETE", token: first.token, org: first.orgId }), 409);
        expect(lines.join("\n")).toContain("cloud link set from CLOUD_TOKEN");
        expect(lines.join("\n")).not.toContain(cloudOwner.token);
      } finally {
        env.stop();
      }
    } finally {
      await fresh.close();
    }
  });

  it("CLOUD_TOKEN with the cloud down at start: retried until it answers, then linked", async () => {
    const fresh: Harness = await openPgliteHarness();
    const relay = await lateRelay(cloud.url);
    try {
      const first = await seedTenant(fresh);
      const cloudOwner = await cloud.seedTenant();
      const lines: string[] = [];
      // CLOUD_API_URL names a port nothing listens on yet: the cloud is down at start.
      const env = linkFromEnvironment(
        fresh.db,
        fresh.keyring,
        { apiUrl: relay.url, token: cloudOwner.token },
        jsonLogger((l) => lines.push(l)),
        100,
      );
      try {
        await eventually(async () => expect(lines.join("\n")).toContain("retrying"), 5_000);
        expect(await fresh.db.select().from(cloudLinks)).toEqual([]);
        // The cloud comes up at that URL: the next attempt links.
        await relay.listen();
        const [row] = await eventually(async () => {
          const rows = await fresh.db.select().from(cloudLinks);
          expect(rows).toHaveLength(1);
          return rows;
        }, 5_000);
        expect(row).toMatchObject({ orgId: first.orgId, cloudOrgId: cloudOwner.orgId, apiUrl: relay.url, fromEnvironment: "CLOUD_TOKEN" });
        expect(lines.join("\n")).not.toContain(cloudOwner.token);
      } finally {
        env.stop();
      }
    } finally {
      await relay.close();
      await fresh.close();
    }
  });
});

describe("the home feed of a linked organization", () => {
  it("merges 3 local and 3 cloud projects by id: limit 2 pages every one exactly once, in id order, with its location", async () => {
    const { shOwner, cloudOwner } = await linkedPair();
    const made: Array<{ id: string; location: string }> = [];
    for (let i = 0; i < 3; i++) {
      made.push({ id: (await localProject(shOwner)).id, location: "self-hosted" });
      await sleep(3);
      made.push({ id: (await cloudProject(cloudOwner)).id, location: "cloud" });
      await sleep(3);
    }
    // Alternately made: the ids interleave (local, cloud, local, …).
    expect([...made].sort((a, b) => (a.id < b.id ? -1 : 1))).toEqual(made);

    const pages = await homeFeed(sh, shOwner, 2);
    for (const page of pages) {
      expect(page.items.length).toBeLessThanOrEqual(2);
      expect(page.cloud).toEqual({ reachable: true });
    }
    const items = pages.flatMap((p) => p.items);
    expect(items.map((p) => ({ id: p.id, location: p.location }))).toEqual(made);
    console.info(`home feed: 6 projects at limit 2 in ${pages.length} pages (${pages.map((p) => p.items.length).join("+")})`);

    // The cloud projects listed are now known to the instance (forwardable), and only those.
    const known = await sh.db.select({ id: cloudProjects.id }).from(cloudProjects).where(eq(cloudProjects.orgId, shOwner.orgId));
    expect(known.map((r) => r.id).sort()).toEqual(made.filter((m) => m.location === "cloud").map((m) => m.id));
  });

  it("pages sides of uneven length (1 local, 4 cloud, limit 2) without skipping or repeating", async () => {
    const { shOwner, cloudOwner } = await linkedPair();
    const made: Array<{ id: string; location: string }> = [];
    made.push({ id: (await cloudProject(cloudOwner)).id, location: "cloud" });
    await sleep(3);
    made.push({ id: (await cloudProject(cloudOwner)).id, location: "cloud" });
    await sleep(3);
    made.push({ id: (await cloudProject(cloudOwner)).id, location: "cloud" });
    await sleep(3);
    made.push({ id: (await localProject(shOwner)).id, location: "self-hosted" });
    await sleep(3);
    made.push({ id: (await cloudProject(cloudOwner)).id, location: "cloud" });
    for (const limit of [1, 2, 3, 100]) {
      const items = (await homeFeed(sh, shOwner, limit)).flatMap((p) => p.items);
      expect(
        items.map((p) => ({ id: p.id, location: p.location })),
        `limit ${limit}`,
      ).toEqual(made);
    }
  });

  it("with the cloud unreachable: this instance's projects, 200, and cloud.reachable false with a reason", async () => {
    const { shOwner, cloudOwner } = await linkedPair();
    const local = await localProject(shOwner);
    await cloudProject(cloudOwner);
    expect((await homePage(sh, shOwner)).items).toHaveLength(2);

    await pointLinkAt(sh, shOwner.orgId, await closedLoopbackUrl());
    const started = performance.now();
    const page = await homePage(sh, shOwner);
    const ms = Math.round(performance.now() - started);
    expect(page.items.map((p) => p.id)).toEqual([local.id]);
    expect(page.nextCursor).toBeNull();
    expect(page.cloud?.reachable).toBe(false);
    expect(page.cloud?.reason).toMatch(/could not be reached/);
    console.info(`home feed with the cloud refused: ${ms} ms`);
  });

  it("with the link's token revoked on the cloud: reachable false, the reason says to link again", async () => {
    const { shOwner, cloudOwner } = await linkedPair();
    const tokens = await expectStatus<{ items: Array<{ id: string }> }>(await cloud.request("/api/tokens", { token: cloudOwner.token }), 200);
    expect(tokens.items).toHaveLength(1);
    expect((await cloud.request(`/api/tokens/${tokens.items[0]!.id}`, { method: "DELETE", token: cloudOwner.token })).status).toBe(204);
    const page = await homePage(sh, shOwner);
    expect(page.cloud).toMatchObject({ reachable: false });
    expect(page.cloud?.reason).toMatch(/refused the link's token/);
  });
});

describe("forwarding a cloud project's per-project routes", () => {
  /** A linked pair with one cloud project the home feed has listed. */
  async function listedCloudProject() {
    const pair = await linkedPair();
    const project = await cloudProject(pair.cloudOwner);
    const page = await homePage(sh, pair.shOwner);
    expect(page.items.map((p) => p.id)).toContain(project.id);
    return { ...pair, project };
  }

  it("GET answers the cloud's own answer, marked x-project-location: cloud; an unknown id is 404 without asking the cloud", async () => {
    const { shOwner, cloudOwner, project } = await listedCloudProject();
    const viaInstance = await sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId });
    expect(viaInstance.headers.get("x-project-location")).toBe("cloud");
    expect(viaInstance.headers.get("x-cloud-request-id")).toMatch(/^req/);
    expect(viaInstance.headers.get("x-request-id")).toMatch(/^req/);
    expect(viaInstance.headers.get("x-request-id")).not.toBe(viaInstance.headers.get("x-cloud-request-id"));
    const proxied = await expectBody(viaInstance, 200, ProjectSchema);
    const direct = await expectBody(await cloud.request(`/api/projects/${project.id}`, { token: cloudOwner.token, org: cloudOwner.orgId }), 200, ProjectSchema);
    expect(proxied).toEqual(direct);
    expect(proxied.location).toBe("cloud");

    // A viewer on the instance may read it too (project:read here; the cloud sees the link's token).
    const viewer = await seedMember(sh, shOwner.orgId, "viewer");
    expect(await expectBody(await sh.request(`/api/projects/${project.id}`, { token: viewer.token, org: viewer.orgId }), 200, ProjectSchema)).toEqual(direct);

    // Latency, proxied vs direct (sequential, warm).
    const time = async (fn: () => Promise<Response>) => {
      const samples: number[] = [];
      for (let i = 0; i < 15; i++) {
        const t = performance.now();
        const res = await fn();
        await res.arrayBuffer();
        samples.push(performance.now() - t);
      }
      return median(samples);
    };
    const directMs = await time(() => cloud.request(`/api/projects/${project.id}`, { token: cloudOwner.token, org: cloudOwner.orgId }));
    const proxiedMs = await time(() => sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId }));
    console.info(`GET /api/projects/{id}: direct to the cloud ${directMs} ms, through the instance ${proxiedMs} ms (median of 15)`);

    // An id neither side knows: the instance's own 404, and the cloud never hears of it.
    const unknown = newId("prj");
    const before = cloudCalls(unknown);
    const res = await sh.request(`/api/projects/${unknown}`, { token: shOwner.token, org: shOwner.orgId });
    await expectProblem(res, 404);
    expect(res.headers.get("x-project-location")).toBeNull();
    expect(cloudCalls(unknown)).toBe(before);
    // The same with the cloud gone: still 404, not 502 (no round trip was needed).
    await pointLinkAt(sh, shOwner.orgId, await closedLoopbackUrl());
    await expectProblem(await sh.request(`/api/projects/${unknown}`, { token: shOwner.token, org: shOwner.orgId }), 404);
    // …while the cloud project is now 502.
    await expectProblem(await sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId }), 502);
  });

  it("PATCH env merges through the proxy: secrets kept and masked on the cloud; a viewer is refused here and the cloud is untouched", async () => {
    const { shOwner, cloudOwner, project } = await listedCloudProject();
    const envPath = `/api/projects/${project.id}/env`;
    const patch = (m: Member, json: unknown) => sh.request(envPath, { method: "PATCH", token: m.token, org: m.orgId, json });
    const secret = `s3cr3t-${newId("v")}`;

    const first = await expectStatus<{ upserted: Array<{ key: string; value: string; isSecret: boolean }> }>(
      await patch(shOwner, {
        upserts: [
          { key: "PLAIN", value: "one" },
          { key: "API_KEY", value: secret, isSecret: true },
        ],
      }),
      200,
    );
    expect(first.upserted.map(({ key, value, isSecret }) => ({ key, value, isSecret })).sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { key: "API_KEY", value: MASK, isSecret: true },
      { key: "PLAIN", value: "one", isSecret: false },
    ]);
    // The second merge sends the masked secret back unchanged and edits the plain one.
    const second = await patch(shOwner, {
      upserts: [
        { key: "PLAIN", value: "two" },
        { key: "API_KEY", value: MASK },
      ],
    });
    expect(second.headers.get("x-project-location")).toBe("cloud");
    await expectStatus(second, 200);

    const cloudEnv = envTools(cloud);
    expect(await cloudEnv.readEnv(cloudOwner, project)).toEqual([
      { key: "API_KEY", value: MASK, isSecret: true },
      { key: "PLAIN", value: "two", isSecret: false },
    ]);
    const stored = await cloudEnv.storedSecret(project, cloudOwner.orgId, "API_KEY");
    expect(stored.plain).toBe(secret);
    // Read through the instance too: masked.
    const listed = await expectStatus<{ items: Array<{ key: string; value: string }> }>(
      await sh.request(envPath, { token: shOwner.token, org: shOwner.orgId }),
      200,
    );
    expect(listed.items.find((v) => v.key === "API_KEY")?.value).toBe(MASK);
    expect(sh.logs.join("\n")).not.toContain(secret);

    // A viewer: 403 here, nothing reaches the cloud.
    const viewer = await seedMember(sh, shOwner.orgId, "viewer");
    const before = cloudCalls(`${project.id}/env`);
    // The cloud logs a line per request: the owner's three calls above are there (so "unchanged" below means something).
    expect(before).toBeGreaterThanOrEqual(3);
    const refused = await patch(viewer, { upserts: [{ key: "PLAIN", value: "viewer was here" }] });
    await expectProblem(refused, 403);
    expect(refused.headers.get("x-project-location")).toBeNull();
    expect(cloudCalls(`${project.id}/env`)).toBe(before);
    expect((await cloudEnv.readEnv(cloudOwner, project)).find((v) => v.key === "PLAIN")?.value).toBe("two");

    // A 400 of the cloud comes back as it was: the same problem, naming the field.
    const bad = await patch(shOwner, { upserts: [{ key: "1BAD", value: "x" }] });
    const problem = await expectProblem(bad, 400);
    expect(bad.headers.get("x-project-location")).toBe("cloud");
    const direct = await expectProblem(
      await cloud.request(envPath, { method: "PATCH", token: cloudOwner.token, org: cloudOwner.orgId, json: { upserts: [{ key: "1BAD", value: "x" }] } }),
      400,
    );
    expect(problem.field).toBeTruthy();
    expect(problem.field).toBe(direct.field);
    expect(problem.detail).toBe(direct.detail);
  });

  it("route rules (self-hosted only) of a cloud project are 404, never forwarded", async () => {
    const { shOwner, project } = await listedCloudProject();
    const before = cloudCalls(`${project.id}/route-rules`);
    const list = await sh.request(`/api/projects/${project.id}/route-rules`, { token: shOwner.token, org: shOwner.orgId });
    await expectProblem(list, 404);
    expect(list.headers.get("x-project-location")).toBeNull();
    const create = await sh.request(`/api/projects/${project.id}/route-rules`, {
      method: "POST",
      token: shOwner.token,
      org: shOwner.orgId,
      json: { path: "/x", action: "redirect", target: "/y" },
    });
    expect([400, 404]).toContain(create.status);
    expect(create.headers.get("x-project-location")).toBeNull();
    expect(cloudCalls(`${project.id}/route-rules`)).toBe(before);
  });

  it("the runtime log stream (SSE) comes through as the cloud writes lines", async () => {
    const { shOwner, cloudOwner, project } = await listedCloudProject();
    const res = await sh.request(`/api/projects/${project.id}/logs/stream`, { token: shOwner.token, org: shOwner.orgId });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-project-location")).toBe("cloud");
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = new SseReader(res);
    try {
      const seed = lineSeeder(cloud);
      const started = performance.now();
      await seed({ orgId: cloudOwner.orgId, projectId: project.id, deploymentId: null }, ["hello from the cloud", "second line"]);
      await reader.until((r) => r.lines.length >= 2, 10_000, "two lines");
      const firstMs = Math.round(performance.now() - started);
      await seed({ orgId: cloudOwner.orgId, projectId: project.id, deploymentId: null }, ["third line"]);
      await reader.until((r) => r.lines.length >= 3, 10_000, "the third line");
      expect(reader.lines.map((l) => l.message)).toEqual(["hello from the cloud", "second line", "third line"]);
      expect(reader.lastId).toBeDefined();
      console.info(`log stream through the instance: first lines after ${firstMs} ms (the Worker polls every 1 s)`);

      // Last-Event-ID goes through: a reconnect resumes after the first line.
      const firstId = reader.events.find((e) => e.event === "log")!.id!;
      const again = await sh.request(`/api/projects/${project.id}/logs/stream`, {
        token: shOwner.token,
        org: shOwner.orgId,
        headers: { "last-event-id": firstId },
      });
      expect(again.status).toBe(200);
      const resumed = new SseReader(again);
      try {
        await resumed.until((r) => r.lines.length >= 2, 10_000, "the resumed lines");
        expect(resumed.lines.map((l) => l.message)).toEqual(["second line", "third line"]);
      } finally {
        await resumed.close();
      }
    } finally {
      await reader.close();
    }
  });

  it("when the cloud deletes the project, the next forwarded call is 404 and the id is then unknown here", async () => {
    const { shOwner, cloudOwner, project } = await listedCloudProject();
    await expectStatus(await cloud.request(`/api/projects/${project.id}`, { method: "DELETE", token: cloudOwner.token, org: cloudOwner.orgId }), 200);

    const gone = await sh.request(`/api/projects/${project.id}/env`, { token: shOwner.token, org: shOwner.orgId });
    await expectProblem(gone, 404);
    expect(gone.headers.get("x-project-location")).toBe("cloud");
    expect(
      await sh.db
        .select()
        .from(cloudProjects)
        .where(and(eq(cloudProjects.id, project.id), eq(cloudProjects.orgId, shOwner.orgId))),
    ).toEqual([]);

    // Unknown here now: the instance's own 404, and the cloud is not asked.
    const before = cloudCalls(project.id);
    expect(before).toBeGreaterThan(0);
    const after = await sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId });
    await expectProblem(after, 404);
    expect(after.headers.get("x-project-location")).toBeNull();
    expect(cloudCalls(project.id)).toBe(before);
  });

  it("a sub-resource's 404 from the cloud does not forget the project", async () => {
    const { shOwner, project } = await listedCloudProject();
    const res = await sh.request(`/api/projects/${project.id}/domains/nothing.example.com`, { method: "DELETE", token: shOwner.token, org: shOwner.orgId });
    expect(res.headers.get("x-project-location")).toBe("cloud");
    await expectProblem(res, 404);
    expect(await sh.db.select().from(cloudProjects).where(eq(cloudProjects.id, project.id))).toHaveLength(1);
    await expectBody(await sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId }), 200, ProjectSchema);
  });

  // cloud_projects is keyed by (org_id, id): each organization records the cloud ids it has seen.
  it("two instance organizations linked to one cloud organization both reach its project", async () => {
    const { shOwner, cloudOwner, project } = await listedCloudProject();
    const second = await seedTenant(sh);
    await linkInstance(sh, second, cloud, cloudOwner);
    expect((await homePage(sh, second)).items.map((p) => p.id)).toContain(project.id);
    await expectBody(await sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId }), 200, ProjectSchema);
    await expectBody(await sh.request(`/api/projects/${project.id}`, { token: second.token, org: second.orgId }), 200, ProjectSchema);
  });

  it("unlinked, a known cloud project's routes are 409", async () => {
    const { shOwner, project } = await listedCloudProject();
    expect((await sh.request("/api/cloud/link", { method: "DELETE", token: shOwner.token, org: shOwner.orgId })).status).toBe(204);
    await expectProblem(await sh.request(`/api/projects/${project.id}`, { token: shOwner.token, org: shOwner.orgId }), 409);
  });
});
