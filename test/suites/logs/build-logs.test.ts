/**
 * Build logs (functions/logs/build-logs.ts): the page (oldest first, cursor), the
 * 16 KiB cut, ANSI kept, org scoping, the deployment-session token, each line's
 * deployment and environment, and the SSE stream: lines, Last-Event-ID resume,
 * heartbeats, the `end` event once finished.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { markReady, markStatus } from "../../../functions/deployments/store";
import { LogPageSchema } from "../../../functions/logs/schema";
import { MAX_LINE_CHARS, TRUNCATED_MARKER } from "../../../functions/logs/store";
import { sseSettings } from "../../../shared/http/sse";
import { deploymentHelpers } from "../../support/deployments";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { type Project, projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { lineSeeder, useStreams } from "./support";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const { seedQueued } = deploymentHelpers(h);
const { stream } = useStreams(h);
const seed = lineSeeder(h);

const saved = { ...sseSettings };
beforeAll(() => {
  sseSettings.pollMs = 100;
  sseSettings.heartbeatMs = 300;
});
afterAll(() => {
  Object.assign(sseSettings, saved);
});

async function deploymentOf(t: Member) {
  const p = await create(t);
  const d = await seedQueued(p);
  return { p, d, target: { orgId: t.orgId, projectId: p.id, deploymentId: d.id } };
}

const page = async (t: { token: string; orgId: string }, id: string, query = "") =>
  h.request(`/api/deployments/${id}/logs${query}`, { token: t.token, org: t.orgId });

async function sessionOf(t: Member, p: Project) {
  const s = await expectStatus(await call(t, `/${p.id}/deployment-session`, { method: "POST" }), 201);
  return { ...t, token: s.token as string };
}

describe("build logs: page", () => {
  it("pages build lines oldest first with a cursor; runtime lines and other deployments stay out", async () => {
    const t = await seedTenant(h);
    const { p, d, target } = await deploymentOf(t);
    const other = await seedQueued(p);
    await seed(target, ["one", "two", "three"], { kind: "build" });
    await seed({ ...target, deploymentId: other.id }, ["other deployment"], { kind: "build" });
    await seed(target, ["runtime line"], { kind: "runtime" });
    await seed(target, ["four", "five"], { kind: "build", stream: "stderr" });

    const first = await expectBody(await page(t, d.id, "?limit=2"), 200, LogPageSchema);
    expect(first.items.map((l) => l.message)).toEqual(["one", "two"]);
    expect(first.items[0]).toMatchObject({ deploymentId: d.id, environment: "production", stream: "stdout" });
    expect(Number(first.items[1]!.id)).toBeGreaterThan(Number(first.items[0]!.id));
    expect(Number.isNaN(Date.parse(first.items[0]!.timestamp))).toBe(false);
    const second = await expectBody(await page(t, d.id, `?limit=2&cursor=${first.nextCursor}`), 200, LogPageSchema);
    expect(second.items.map((l) => l.message)).toEqual(["three", "four"]);
    const third = await expectBody(await page(t, d.id, `?limit=2&cursor=${second.nextCursor}`), 200, LogPageSchema);
    expect(third).toMatchObject({ items: [{ message: "five", stream: "stderr" }], nextCursor: null });
    // Default limit: everything here fits one page.
    expect((await expectBody(await page(t, d.id), 200, LogPageSchema)).items).toHaveLength(5);
  });

  it("cuts a line over 16 KiB with the marker and keeps ANSI escapes as sent", async () => {
    const t = await seedTenant(h);
    const { d, target } = await deploymentOf(t);
    const ansi = "\u001b[32m✓ compiled\u001b[0m \u001b[1;31mwarn\u001b[0m";
    await seed(target, ["x".repeat(MAX_LINE_CHARS + 500), "y".repeat(MAX_LINE_CHARS), ansi], { kind: "build" });
    const { items } = await expectBody(await page(t, d.id), 200, LogPageSchema);
    expect(items[0]!.message).toBe("x".repeat(MAX_LINE_CHARS) + TRUNCATED_MARKER);
    expect(items[1]!.message).toBe("y".repeat(MAX_LINE_CHARS));
    expect(items[2]!.message).toBe(ansi);
  });

  it("400 names cursor or limit; 404 for another organization's or an unknown deployment", async () => {
    const t = await seedTenant(h);
    const { d, target } = await deploymentOf(t);
    await seed(target, ["secret build output"], { kind: "build" });
    await expectProblem(await page(t, d.id, "?cursor=abc"), 400, "cursor");
    await expectProblem(await page(t, d.id, "?limit=0"), 400, "limit");
    await expectProblem(await page(t, d.id, "?limit=1001"), 400, "limit");
    await expectProblem(await page(t, d.id, "?bogus=1"), 400, "bogus");
    const stranger = await seedTenant(h);
    const foreign = await expectProblem(await page(stranger, d.id), 404);
    const unknown = await expectProblem(await page(stranger, "dpl_nope"), 404);
    expect(foreign.detail).toBe(unknown.detail);
    const res = await h.request(`/api/deployments/${d.id}/logs/stream`, { token: stranger.token, org: stranger.orgId });
    await expectProblem(res, 404);
  });

  it("accepts the project's deployment-session token for its own deployments' logs and refuses it (403) elsewhere", async () => {
    const t = await seedTenant(h);
    const { p, d, target } = await deploymentOf(t);
    const { d: theirs } = await deploymentOf(t);
    await seed(target, ["built"], { kind: "build" });
    const session = await sessionOf(t, p);
    expect((await expectBody(await page(session, d.id), 200, LogPageSchema)).items.map((l) => l.message)).toEqual(["built"]);
    await markStatus(h.db, d.id, "failed", new Date(), "exit 1");
    const s = await stream(session, `/api/deployments/${d.id}/logs/stream`);
    await s.until((r) => r.closed, 10_000, "end");
    expect(s.lines.map((l) => l.message)).toEqual(["built"]);
    // Another project's deployment, a route not meant for it.
    await expectProblem(await page(session, theirs.id), 403);
    await expectProblem(await h.request(`/api/deployments/${theirs.id}/logs/stream`, { token: session.token, org: t.orgId }), 403);
    await expectProblem(await h.request(`/api/deployments/${d.id}/cancel`, { method: "POST", token: session.token, org: t.orgId }), 403);
  });
});

describe("build logs: where each line comes from", () => {
  it("a preview's build lines name its deployment and environment, in the page and in the stream", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "preview-x", branch: "feature-x" } }), 201);
    const d = await seedQueued(p, "preview-x");
    await seed({ orgId: t.orgId, projectId: p.id, deploymentId: d.id }, ["$ npm ci", "$ npm run build"], { kind: "build" });
    await markStatus(h.db, d.id, "failed", new Date(), "exit 1");
    const { items } = await expectBody(await page(t, d.id), 200, LogPageSchema);
    expect(items.map((l) => [l.message, l.deploymentId, l.environment])).toEqual([
      ["$ npm ci", d.id, "preview-x"],
      ["$ npm run build", d.id, "preview-x"],
    ]);
    const s = await stream(t, `/api/deployments/${d.id}/logs/stream`);
    await s.until((r) => r.closed, 10_000, "end");
    expect(s.lines).toEqual(items);
  });
});

describe("build logs: stream", () => {
  it("sends every line as id/event: log/data, then `end` with the status once the deployment is ready", async () => {
    const t = await seedTenant(h);
    const { d, target } = await deploymentOf(t);
    await seed(target, ["$ npm install", "added 3 packages"], { kind: "build" });
    const s = await stream(t, `/api/deployments/${d.id}/logs/stream`);
    await s.until((r) => r.lines.length === 2, 10_000, "the first lines");
    await markStatus(h.db, d.id, "building", new Date());
    await seed(target, ["$ npm run build", "\u001b[32mdone\u001b[0m"], { kind: "build", stream: "stderr" });
    await s.until((r) => r.lines.length === 4, 10_000, "the later lines");
    expect(s.closed).toBe(false);
    await markStatus(h.db, d.id, "deploying", new Date());
    await seed(target, ["listening on 3000"], { kind: "build", stream: "system" });
    await markReady(h.db, d.id, new Date());
    await s.until((r) => r.closed, 10_000, "the end of the stream");
    const logs = s.events.filter((e) => e.event === "log");
    expect(logs.every((e) => e.id === JSON.parse(e.data).id)).toBe(true);
    expect(s.lines.map((l) => l.message)).toEqual(["$ npm install", "added 3 packages", "$ npm run build", "\u001b[32mdone\u001b[0m", "listening on 3000"]);
    expect(s.events.at(-1)).toEqual({ event: "end", data: JSON.stringify({ status: "ready", failureReason: null }) });
    expect(s.events.filter((e) => e.event === "end")).toHaveLength(1);
  });

  it("a finished deployment's stream sends its lines and `end` with the failure reason at once", async () => {
    const t = await seedTenant(h);
    const { d, target } = await deploymentOf(t);
    await seed(target, ["npm ERR! missing script: build"], { kind: "build", stream: "stderr" });
    await markStatus(h.db, d.id, "failed", new Date(), "The build exited with status 1");
    const s = await stream(t, `/api/deployments/${d.id}/logs/stream`);
    await s.until((r) => r.closed, 10_000, "end");
    expect(s.lines.map((l) => l.message)).toEqual(["npm ERR! missing script: build"]);
    expect(JSON.parse(s.events.at(-1)!.data)).toEqual({ status: "failed", failureReason: "The build exited with status 1" });
  });

  it("resumes after Last-Event-ID (or lastEventId) losing and repeating nothing written while disconnected; heartbeats while idle", async () => {
    const t = await seedTenant(h);
    const { d, target } = await deploymentOf(t);
    await seed(target, ["a1", "a2", "a3"], { kind: "build" });
    const first = await stream(t, `/api/deployments/${d.id}/logs/stream`);
    await first.until((r) => r.lines.length === 3, 10_000, "three lines");
    await first.until((r) => r.comments.includes(": keep-alive"), 5_000, "a heartbeat");
    const last = first.lastId!;
    await first.close();
    await seed(target, ["b1", "b2"], { kind: "build" });
    await markStatus(h.db, d.id, "canceled", new Date());
    const resumed = await stream(t, `/api/deployments/${d.id}/logs/stream`, { headers: { "last-event-id": last } });
    await resumed.until((r) => r.closed, 10_000, "end");
    expect(resumed.lines.map((l) => l.message)).toEqual(["b1", "b2"]);
    expect(JSON.parse(resumed.events.at(-1)!.data)).toEqual({ status: "canceled", failureReason: null });
    const byQuery = await stream(t, `/api/deployments/${d.id}/logs/stream?lastEventId=${resumed.lines[0]!.id}`);
    await byQuery.until((r) => r.closed, 10_000, "end");
    expect(byQuery.lines.map((l) => l.message)).toEqual(["b2"]);
    const bad = await h.request(`/api/deployments/${d.id}/logs/stream`, { token: t.token, org: t.orgId, headers: { "last-event-id": "x1" } });
    await expectProblem(bad, 400, "Last-Event-ID");
  });
});
