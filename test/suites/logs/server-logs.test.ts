/**
 * Server logs (functions/logs/server-logs.ts): the recent page and its filters,
 * the stream with a bearer token and with a short-lived stream token in the
 * query, and everything a stream token is refused for (other routes, other
 * projects, after its 60 s, a personal token in the query).
 */
import { eq } from "drizzle-orm";
import { z } from "@hono/zod-openapi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RequestLineSchema } from "../../../functions/logs/server-logs";
import { appendLogLines } from "../../../functions/logs/store";
import { apiTokens } from "../../../shared/db/schema";
import { sseSettings } from "../../../shared/http/sse";
import { expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { requestSeeder, type SeededRequest, useStreams } from "./support";

const h = useRuntimeHarness();
const { create } = projectHelpers(h);
const { stream } = useStreams(h);
const seedRequestsOf = requestSeeder(h);
const Page = z.object({ items: z.array(RequestLineSchema), nextCursor: z.string().nullable() });
const TokenSchema = z.object({ token: z.string(), expiresAt: z.string(), streamUrl: z.string() });

const saved = { ...sseSettings };
beforeAll(() => {
  sseSettings.pollMs = 100;
  sseSettings.heartbeatMs = 300;
});
afterAll(() => {
  Object.assign(sseSettings, saved);
});

const seedRequests = (t: Member, projectId: string, requests: SeededRequest[], opts: { eachAlone?: boolean } = {}) =>
  seedRequestsOf({ orgId: t.orgId, projectId }, requests, opts);

const recent = (t: Member, projectId: string, query = "") =>
  h.request(`/api/projects/${projectId}/server-logs/recent${query}`, { token: t.token, org: t.orgId });
const paths = async (t: Member, projectId: string, query = "") =>
  (await expectBody(await recent(t, projectId, query), 200, Page)).items.map((l) => `${l.path} ${l.status}`);

describe("server logs: recent", () => {
  it("pages newest last and filters by status class or code, method, path prefix and since; runtime lines stay out", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await seedRequests(t, p.id, [
      { path: "/", status: 200, at: new Date("2030-01-01T00:00:00Z") },
      { path: "/api/users", status: 404, at: new Date("2030-01-01T00:01:00Z") },
      { path: "/api/orders", status: 500, method: "POST", at: new Date("2030-01-01T00:02:00Z") },
      { path: "/apix", status: 503, at: new Date("2030-01-01T00:03:00Z") },
      { path: "/limited", status: 429, at: new Date("2030-01-01T00:04:00Z") },
    ]);
    await appendLogLines(h.db, [
      { orgId: t.orgId, projectId: p.id, deploymentId: null, kind: "runtime", stream: "stdout", at: new Date(), message: "app line" },
    ]);
    expect(await paths(t, p.id)).toEqual(["/ 200", "/api/users 404", "/api/orders 500", "/apix 503", "/limited 429"]);
    expect(await paths(t, p.id, "?status=5xx")).toEqual(["/api/orders 500", "/apix 503"]);
    expect(await paths(t, p.id, "?status=404")).toEqual(["/api/users 404"]);
    expect(await paths(t, p.id, "?method=POST")).toEqual(["/api/orders 500"]);
    expect(await paths(t, p.id, "?path=/api/")).toEqual(["/api/users 404", "/api/orders 500"]);
    expect(await paths(t, p.id, "?since=2030-01-01T00:03:00Z")).toEqual(["/apix 503", "/limited 429"]);
    const first = await expectBody(await recent(t, p.id, "?limit=2"), 200, Page);
    expect(first.items.map((l) => l.path)).toEqual(["/apix", "/limited"]);
    expect(first.items[1]).toMatchObject({ status: 429, rule: "rr_test", clientAddress: "203.0.113.9", method: "GET", environment: "production" });
    const older = await expectBody(await recent(t, p.id, `?limit=2&cursor=${first.nextCursor}`), 200, Page);
    expect(older.items.map((l) => l.path)).toEqual(["/api/users", "/api/orders"]);
  });

  it("reads across batch rows: hundreds of one-line batches (the Worker's) and batches of thousands (a busy edge's flush)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const at = new Date("2030-02-01T00:00:00Z");
    await seedRequests(
      t,
      p.id,
      Array.from({ length: 250 }, (_, i) => ({ path: `/one/${i}`, status: i % 50 === 0 ? 500 : 200, at })),
      { eachAlone: true },
    );
    await seedRequests(
      t,
      p.id,
      Array.from({ length: 12_000 }, (_, i) => ({ path: `/bulk/${i}`, status: i === 0 ? 503 : 200, at })),
    );
    await seedRequests(
      t,
      p.id,
      [0, 1, 2].map((i) => ({ path: `/tail/${i}`, status: 200, at })),
      { eachAlone: true },
    );
    const failures = ["/one/0 500", "/one/50 500", "/one/100 500", "/one/150 500", "/one/200 500", "/bulk/0 503"];
    expect(await paths(t, p.id, "?status=5xx&limit=100")).toEqual(failures);
    expect(await paths(t, p.id, "?limit=4")).toEqual(["/bulk/11999 200", "/tail/0 200", "/tail/1 200", "/tail/2 200"]);
    const bulk0 = (await expectBody(await recent(t, p.id, "?status=503"), 200, Page)).items[0]!;
    expect(await paths(t, p.id, `?limit=2&cursor=${bulk0.id}`)).toEqual(["/one/248 200", "/one/249 200"]);
    const reader = await stream(t, `/api/projects/${p.id}/server-logs/stream?since=2030-01-01T00:00:00Z&status=5xx`);
    await reader.until((r) => r.events.length === failures.length, 10_000, "the failures");
    expect(reader.events.map((e) => `${JSON.parse(e.data).path} ${JSON.parse(e.data).status}`)).toEqual(failures);
  });

  it("refuses malformed filters naming the field; another organization's project is 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    for (const [query, field] of [
      ["?status=6xx", "status"],
      ["?status=20", "status"],
      ["?method=get", "method"],
      ["?path=api", "path"],
      ["?since=yesterday", "since"],
      ["?limit=0", "limit"],
    ] as const) {
      expect((await expectProblem(await recent(t, p.id, query), 400)).field, query).toBe(field);
    }
    const stranger = await seedTenant(h);
    await expectStatus(await recent(stranger, p.id), 404);
    await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: stranger.token }), 404);
  });
});

describe("server logs: stream and stream token", () => {
  it("a stream token opens the project's stream from the query; new requests arrive as event: request", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const minted = await expectBody(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: t.token }), 200, TokenSchema);
    expect(minted.token).toMatch(/^wsl_/);
    expect(Date.parse(minted.expiresAt) - Date.now()).toBeLessThanOrEqual(61_000);
    const url = new URL(minted.streamUrl);
    expect(url.pathname).toBe(`/api/projects/${p.id}/server-logs/stream`);
    expect(url.searchParams.get("token")).toBe(minted.token);
    const reader = await stream({ token: "" }, `${url.pathname}${url.search}`, { token: undefined });
    await reader.until((r) => r.comments.length > 0, 5_000, "a heartbeat");
    await seedRequests(t, p.id, [{ path: "/live", status: 201, method: "PUT" }]);
    await reader.until((r) => r.events.some((e) => e.event === "request"), 10_000, "the request line");
    const event = reader.events.find((e) => e.event === "request")!;
    expect(RequestLineSchema.parse(JSON.parse(event.data))).toMatchObject({ path: "/live", status: 201, method: "PUT", id: event.id });
  });

  it("a bearer token with project:read streams too, with since and Last-Event-ID resume", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await seedRequests(t, p.id, [
      { path: "/a", status: 200, at: new Date("2029-01-01T00:00:00Z") },
      { path: "/b", status: 200, at: new Date("2029-01-01T00:00:01Z") },
    ]);
    const first = await stream(t, `/api/projects/${p.id}/server-logs/stream?since=2028-01-01T00:00:00Z`);
    await first.until((r) => r.events.filter((e) => e.event === "request").length === 2, 10_000, "two lines");
    const last = first.lastId!;
    await first.close();
    await seedRequests(t, p.id, [{ path: "/c", status: 200 }]);
    const second = await stream(t, `/api/projects/${p.id}/server-logs/stream`, { headers: { "last-event-id": last } });
    await second.until((r) => r.events.some((e) => e.event === "request"), 10_000, "/c");
    expect(second.events.filter((e) => e.event === "request").map((e) => JSON.parse(e.data).path)).toEqual(["/c"]);
  });

  it("a stream token is refused on every other route, for every other project, after its minute, and no other token rides in the query", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const other = await create(t);
    const { token } = await expectBody(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: t.token }), 200, TokenSchema);
    // As a bearer token on other routes of the same project, and on another project's stream.
    await expectStatus(await h.request(`/api/projects/${p.id}`, { token }), 403);
    await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/recent`, { token }), 403);
    await expectStatus(await h.request(`/api/projects/${p.id}/logs`, { token }), 403);
    await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token }), 403);
    await expectStatus(await h.request(`/api/projects/${other.id}/server-logs/stream?token=${token}`, {}), 403);
    // In the query of another route it is no credential at all.
    await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/recent?token=${token}`, {}), 401);
    // A personal token never rides in a URL.
    const problem = await expectProblem(await h.request(`/api/projects/${p.id}/server-logs/stream?token=${t.token}`, {}), 401);
    expect(problem.detail).toMatch(/log-stream token/);
    // Past its minute (a token not used before, so no process has it cached).
    const late = await expectBody(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: t.token }), 200, TokenSchema);
    await h.db
      .update(apiTokens)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(apiTokens.displayPrefix, late.token.slice(0, 10)));
    await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/stream?token=${late.token}`, {}), 401);
  });

  it("a viewer may mint a stream token (read-only); a deployment-session token may not", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectBody(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: viewer.token }), 200, TokenSchema);
    const session = await expectBody(
      await h.request(`/api/projects/${p.id}/deployment-session`, { method: "POST", token: t.token }),
      201,
      z.object({ token: z.string() }).passthrough(),
    );
    await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: session.token }), 403);
  });
});
