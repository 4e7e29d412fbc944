/**
 * Runtime logs (functions/logs/runtime-logs.ts): the page (newest last, cursor to
 * older lines) and every filter, 400s naming the field, org scoping, the session
 * token, and the SSE stream: from now, from `since`, filters, Last-Event-ID resume,
 * heartbeats; every line naming its deployment and environment (production and a
 * preview read together, and apart with `environment`); on real Postgres,
 * concurrent writers never show a stream a gap or a repeated sequence number.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvironmentSchema } from "../../../functions/projects/environments";
import { STREAM_BATCH } from "../../../functions/logs/query";
import { type LogLine, RuntimeLogPageSchema as LogPageSchema } from "../../../functions/logs/schema";
import { appendLogLines, logSearchSettings, type NewLogLine } from "../../../functions/logs/store";
import { sseSettings } from "../../../shared/http/sse";
import { deploymentHelpers } from "../../support/deployments";
import { expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
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

async function projectOf(t: Member) {
  const p = await create(t);
  const d = await seedQueued(p);
  return { p, d, target: { orgId: t.orgId, projectId: p.id, deploymentId: d.id } };
}

const logs = (t: { token: string; orgId: string }, projectId: string, query = "") =>
  h.request(`/api/projects/${projectId}/logs${query}`, { token: t.token, org: t.orgId });
const messages = async (t: Member, projectId: string, query = "") =>
  (await expectBody(await logs(t, projectId, query), 200, LogPageSchema)).items.map((l) => l.message);

describe("runtime logs: page", () => {
  it("returns the newest lines, newest last; nextCursor pages back to older ones; build lines stay out", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    await seed(target, ["l1", "l2"]);
    await seed(target, ["build line"], { kind: "build" });
    await seed(target, ["l3", "l4", "l5"]);
    const newest = await expectBody(await logs(t, p.id, "?limit=2"), 200, LogPageSchema);
    expect(newest.items.map((l) => l.message)).toEqual(["l4", "l5"]);
    expect(newest.nextCursor).toBe(newest.items[0]!.id);
    const older = await expectBody(await logs(t, p.id, `?limit=2&cursor=${newest.nextCursor}`), 200, LogPageSchema);
    expect(older.items.map((l) => l.message)).toEqual(["l2", "l3"]);
    const oldest = await expectBody(await logs(t, p.id, `?limit=2&cursor=${older.nextCursor}`), 200, LogPageSchema);
    expect(oldest).toMatchObject({ items: [{ message: "l1" }], nextCursor: null });
    expect(await messages(t, p.id)).toEqual(["l1", "l2", "l3", "l4", "l5"]);
  });

  it("filters by deployment, environment, stream, since/until and a case-insensitive substring taken literally", async () => {
    const t = await seedTenant(h);
    const { p, d, target } = await projectOf(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201, EnvironmentSchema);
    const staging = await seedQueued(p, "staging");
    const t0 = Date.parse("2030-01-01T00:00:00Z");
    const at = (minutes: number) => new Date(t0 + minutes * 60_000);
    await seed(target, ["GET /health 200", "Error: DB down", "100% done_ok"], { at: (i) => at(i) });
    await seed(target, ["warn: slow query"], { stream: "stderr", at: at(3) });
    await seed({ ...target, deploymentId: staging.id }, ["staging says hi", "staging ERROR"], { at: at(4) });

    expect(await messages(t, p.id, `?deploymentId=${staging.id}`)).toEqual(["staging says hi", "staging ERROR"]);
    expect(await messages(t, p.id, `?deploymentId=${d.id}&stream=stderr`)).toEqual(["warn: slow query"]);
    expect(await messages(t, p.id, "?environment=staging")).toEqual(["staging says hi", "staging ERROR"]);
    expect(await messages(t, p.id, "?environment=production&stream=stdout")).toEqual(["GET /health 200", "Error: DB down", "100% done_ok"]);
    expect(await messages(t, p.id, "?q=error")).toEqual(["Error: DB down", "staging ERROR"]);
    expect(await messages(t, p.id, "?q=error&environment=staging")).toEqual(["staging ERROR"]);
    // `%` and `_` are text, not wildcards.
    expect(await messages(t, p.id, `?q=${encodeURIComponent("0% DONE_")}`)).toEqual(["100% done_ok"]);
    expect(await messages(t, p.id, `?q=${encodeURIComponent("%")}`)).toEqual(["100% done_ok"]);
    expect(await messages(t, p.id, "?q=_")).toEqual(["100% done_ok"]);
    const iso = (m: number) => encodeURIComponent(at(m).toISOString());
    expect(await messages(t, p.id, `?since=${iso(1)}&until=${iso(3)}`)).toEqual(["Error: DB down", "100% done_ok"]);
    expect(await messages(t, p.id, `?since=${encodeURIComponent("2030-01-01T01:03:00+01:00")}`)).toEqual([
      "warn: slow query",
      "staging says hi",
      "staging ERROR",
    ]);
    expect(await messages(t, p.id, `?until=${iso(0)}`)).toEqual([]);
  });

  it("a search (q) reads bounded windows: at its budget it answers partial with the cursor to go on from; the pages and a stream from `since` find every match once", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const since = new Date(Date.parse("2030-01-01T00:00:00Z"));
    const lines = Array.from({ length: 300 }, (_, i) => (i % 37 === 5 ? `line ${i} has the NEEDLE` : `line ${i}`));
    await seed(target, lines, { at: () => since });
    await seed(target, ["build NEEDLE"], { kind: "build", at: () => since });
    const matches = lines.filter((l) => l.includes("NEEDLE"));
    const saved = { ...logSearchSettings };
    // Windows of 40 line numbers; a page stops after 100.
    Object.assign(logSearchSettings, { firstWindow: 40, minWindow: 40, maxWindow: 40, budgetRows: 100 });
    try {
      const found: string[] = [];
      let cursor: string | null = null;
      let partials = 0;
      for (let pages = 0; pages < 50; pages++) {
        const page: { items: LogLine[]; nextCursor: string | null; partial: boolean } = await expectBody(
          await logs(t, p.id, `?q=needle&limit=3${cursor ? `&cursor=${cursor}` : ""}`),
          200,
          LogPageSchema,
        );
        if (page.partial) {
          partials++;
          expect(page.nextCursor).toMatch(/^[0-9]+$/);
          for (const l of page.items) expect(Number(l.id)).toBeGreaterThanOrEqual(Number(page.nextCursor));
        }
        found.unshift(...page.items.map((l) => l.message));
        cursor = page.nextCursor;
        if (cursor === null) break;
      }
      expect(found).toEqual(matches);
      expect(partials).toBeGreaterThan(0);
      // Without q a page is never partial.
      expect((await expectBody(await logs(t, p.id, "?limit=5"), 200, LogPageSchema)).partial).toBe(false);
      const followed = await stream(t, `/api/projects/${p.id}/logs/stream?q=needle&since=${encodeURIComponent(since.toISOString())}`);
      await followed.until((r) => r.lines.length === matches.length, 10_000, `${matches.length} lines`);
      expect(followed.lines.map((l) => l.message)).toEqual(matches);
    } finally {
      Object.assign(logSearchSettings, saved);
    }
  });

  it("400 names the field for bad values, unknown environments and other projects' deployments", async () => {
    const t = await seedTenant(h);
    const { p } = await projectOf(t);
    const { d: elsewhere } = await projectOf(t);
    for (const [query, field] of [
      ["?since=yesterday", "since"],
      ["?until=2030-13-01T00:00:00Z", "until"],
      ["?since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z", "until"],
      ["?stream=stdin", "stream"],
      [`?q=${"a".repeat(201)}`, "q"],
      ["?limit=1001", "limit"],
      ["?limit=x", "limit"],
      ["?cursor=-1", "cursor"],
      ["?environment=nope", "environment"],
      ["?environment=Bad_Name", "environment"],
      [`?deploymentId=${elsewhere.id}`, "deploymentId"],
      ["?deploymentId=dpl_unknown", "deploymentId"],
      ["?level=info", "level"],
    ] as const) {
      await expectProblem(await logs(t, p.id, query), 400, field);
    }
    expect(await messages(t, p.id, `?q=${"a".repeat(200)}`)).toEqual([]);
    await expectProblem(await h.request(`/api/projects/${p.id}/logs/stream?stream=stdin`, { token: t.token, org: t.orgId }), 400, "stream");
  });

  it("404 for another organization's project; the session token reads its own project only (403 elsewhere)", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const { p: other } = await projectOf(t);
    await seed(target, ["mine"]);
    const stranger = await seedTenant(h);
    const foreign = await expectProblem(await logs(stranger, p.id), 404);
    expect(foreign.detail).toBe((await expectProblem(await logs(stranger, "prj_nope"), 404)).detail);
    await expectProblem(await h.request(`/api/projects/${p.id}/logs/stream`, { token: stranger.token, org: stranger.orgId }), 404);

    const s = await expectStatus(await call(t, `/${p.id}/deployment-session`, { method: "POST" }), 201);
    const session = { ...t, token: s.token as string };
    expect(await messages(session, p.id)).toEqual(["mine"]);
    const live = await stream(session, `/api/projects/${p.id}/logs/stream?since=2000-01-01T00:00:00Z`);
    await live.until((r) => r.lines.length === 1, 10_000, "the line");
    await expectProblem(await logs(session, other.id), 403);
    await expectProblem(await h.request(`/api/projects/${other.id}/logs/stream`, { token: session.token, org: t.orgId }), 403);
    await expectProblem(await call(session, `/${p.id}/env`, { token: session.token }), 403);
  });
});

describe("runtime logs: where each line comes from", () => {
  const where = (l: LogLine) => [l.message, l.deploymentId, l.environment];

  it("every line of the page and of the stream names its deployment and environment; `environment` keeps only that one's", async () => {
    const t = await seedTenant(h);
    const { p, d: prod, target } = await projectOf(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "preview-x", branch: "feature-x" } }), 201, EnvironmentSchema);
    const preview = await seedQueued(p, "preview-x");
    const previewTarget = { ...target, deploymentId: preview.id };
    const all = await stream(t, `/api/projects/${p.id}/logs/stream`);
    const previewOnly = await stream(t, `/api/projects/${p.id}/logs/stream?environment=preview-x`);
    // Two apps writing at once: their lines interleave in the project's sequence.
    await seed(target, ["prod 1"]);
    await seed(previewTarget, ["preview 1"], { stream: "stderr" });
    await seed(target, ["prod 2"], { stream: "system" });
    await seed(previewTarget, ["preview 2"]);
    const expected = [
      ["prod 1", prod.id, "production"],
      ["preview 1", preview.id, "preview-x"],
      ["prod 2", prod.id, "production"],
      ["preview 2", preview.id, "preview-x"],
    ];
    const ofPreview = expected.filter((e) => e[2] === "preview-x");
    const ofProduction = expected.filter((e) => e[2] === "production");

    const page = await expectBody(await logs(t, p.id), 200, LogPageSchema);
    expect(page.items.map(where)).toEqual(expected);
    expect((await expectBody(await logs(t, p.id, "?environment=preview-x"), 200, LogPageSchema)).items.map(where)).toEqual(ofPreview);
    expect((await expectBody(await logs(t, p.id, "?environment=production"), 200, LogPageSchema)).items.map(where)).toEqual(ofProduction);

    await all.until((r) => r.lines.length === 4, 10_000, "four lines");
    expect(all.lines.map(where)).toEqual(expected);
    await previewOnly.until((r) => r.lines.length === 2, 10_000, "the preview's two lines");
    expect(previewOnly.lines.map(where)).toEqual(ofPreview);
    // A later line of a deployment the stream has already named is named too.
    await seed(previewTarget, ["preview 3"]);
    await all.until((r) => r.lines.length === 5, 10_000, "the fifth line");
    expect(where(all.lines[4]!)).toEqual(["preview 3", preview.id, "preview-x"]);
  });

  it("a stream over more than one batch names every line, in each batch", async () => {
    const t = await seedTenant(h);
    const { p, d: prod, target } = await projectOf(t);
    await expectBody(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "preview-y", branch: "feature-y" } }), 201, EnvironmentSchema);
    const preview = await seedQueued(p, "preview-y");
    const count = STREAM_BATCH + 20;
    const at = new Date("2029-06-01T00:00:00Z");
    await appendLogLines(
      h.db,
      Array.from(
        { length: count },
        (_, i): NewLogLine => ({ ...target, deploymentId: i % 2 ? preview.id : prod.id, kind: "runtime", stream: "stdout", at, message: `m${i}` }),
      ),
    );
    const reader = await stream(t, `/api/projects/${p.id}/logs/stream?since=2029-01-01T00:00:00Z`);
    await reader.until((r) => r.lines.length === count, 20_000, `${count} lines`);
    expect(reader.lines.map((l) => [l.deploymentId, l.environment])).toEqual(
      Array.from({ length: count }, (_, i) => (i % 2 ? [preview.id, "preview-y"] : [prod.id, "production"])),
    );
  });
});

describe("runtime logs: stream", () => {
  it("starts from now: earlier lines are not sent, new ones arrive as id/event: log/data, filters apply", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    await seed(target, ["before"]);
    const all = await stream(t, `/api/projects/${p.id}/logs/stream`);
    const errors = await stream(t, `/api/projects/${p.id}/logs/stream?stream=stderr&q=FAIL`);
    await all.until((r) => r.comments.length > 0, 5_000, "a heartbeat");
    await seed(target, ["after 1", "\u001b[31mfailed\u001b[0m"]);
    await seed(target, ["test failed"], { stream: "stderr" });
    await seed(target, ["build output"], { kind: "build" });
    await all.until((r) => r.lines.length === 3, 10_000, "three lines");
    expect(all.lines.map((l) => l.message)).toEqual(["after 1", "\u001b[31mfailed\u001b[0m", "test failed"]);
    const e = all.events[0]!;
    expect(e.event).toBe("log");
    expect(JSON.parse(e.data)).toEqual({
      id: e.id,
      timestamp: expect.any(String),
      deploymentId: target.deploymentId,
      environment: "production",
      stream: "stdout",
      message: "after 1",
    });
    await errors.until((r) => r.lines.length === 1, 10_000, "the stderr line");
    expect(errors.lines.map((l) => l.message)).toEqual(["test failed"]);
    expect(errors.comments).toContain(": keep-alive");
  });

  it("since starts in the past; Last-Event-ID resumes losing and repeating nothing written while disconnected", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    await seed(target, ["old"], { at: new Date("2020-01-01T00:00:00Z") });
    await seed(target, ["r1", "r2"], { at: new Date("2029-01-01T00:00:00Z") });
    const first = await stream(t, `/api/projects/${p.id}/logs/stream?since=2028-01-01T00:00:00Z`);
    await first.until((r) => r.lines.length === 2, 10_000, "r1, r2");
    await seed(target, ["r3"], { at: new Date("2029-01-02T00:00:00Z") });
    await first.until((r) => r.lines.length === 3, 10_000, "r3");
    const last = first.lastId!;
    await first.close();
    await seed(target, ["r4", "r5"]);
    await seed(target, ["r6"]);
    const second = await stream(t, `/api/projects/${p.id}/logs/stream`, { headers: { "last-event-id": last } });
    await second.until((r) => r.lines.length >= 3, 10_000, "r4-r6");
    await seed(target, ["r7"]);
    await second.until((r) => r.lines.length >= 4, 10_000, "r7");
    const seen = [...first.lines, ...second.lines].map((l) => l.message);
    expect(seen).toEqual(["r1", "r2", "r3", "r4", "r5", "r6", "r7"]);
  });

  it.runIf(h.realConcurrency)("concurrent writers to one project: a streaming reader sees every sequence number once, in order, no gap", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const reader = await stream(t, `/api/projects/${p.id}/logs/stream`);
    const writers = 6;
    const batches = 15;
    const perBatch = 20;
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        for (let b = 0; b < batches; b++) {
          const lines: NewLogLine[] = Array.from({ length: perBatch }, (_, i) => ({
            ...target,
            kind: "runtime",
            stream: "stdout",
            at: new Date(),
            message: `w${w} b${b} l${i}`,
          }));
          await appendLogLines(h.db, lines);
        }
      }),
    );
    const total = writers * batches * perBatch;
    await reader.until((r) => r.lines.length >= total, 20_000, `${total} lines`);
    const ids = reader.lines.map((l) => Number(l.id));
    expect(ids).toHaveLength(total);
    expect(ids).toEqual(Array.from({ length: total }, (_, i) => ids[0]! + i));
    // Each writer's lines in its own order.
    for (let w = 0; w < writers; w++) {
      const mine = reader.lines.filter((l) => l.message.startsWith(`w${w} `)).map((l) => l.message);
      expect(mine).toEqual(Array.from({ length: batches * perBatch }, (_, i) => `w${w} b${Math.floor(i / perBatch)} l${i % perBatch}`));
    }
  });
});
