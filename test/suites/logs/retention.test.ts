/**
 * Log retention (functions/logs/store.ts sweepLogs, sweeper.ts; the Worker's cron):
 * the oldest lines beyond the per-project count go, lines older than the age go,
 * other projects keep theirs. The PGlite database is the file's own, so the sweep
 * runs unscoped there; on the shared Postgres it is scoped to the test's projects.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { DEFAULT_LOG_RETENTION, logRetentionFromEnv, sweepLogs } from "../../../functions/logs/store";
import { logLines } from "../../../shared/db/schema";
import { seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { currentRuntime, useRuntimeHarness } from "../../support/runtime";
import type { WorkerHarness } from "../../support/worker-harness";
import { lineSeeder } from "./support";

const h = useRuntimeHarness();
const { create } = projectHelpers(h);
const seed = lineSeeder(h);
const DAY = 86_400_000;

const seqsOf = async (projectId: string) =>
  (await h.db.select({ seq: logLines.seq, message: logLines.message }).from(logLines).where(eq(logLines.projectId, projectId))).sort((a, b) => a.seq - b.seq);

async function projectWithLines(count: number, at: (i: number) => Date = () => new Date()) {
  const t = await seedTenant(h);
  const p = await create(t);
  const target = { orgId: t.orgId, projectId: p.id, deploymentId: null };
  await seed(
    target,
    Array.from({ length: count }, (_, i) => `line ${i + 1}`),
    { at },
  );
  return p.id;
}

describe("log retention", () => {
  it("keeps the newest lines up to the count per project and removes lines older than the age", async () => {
    // A `now` in the future: the Worker's cron (another file, same Postgres) never removes these lines first.
    const now = new Date(Date.now() + 1000 * DAY);
    const big = await projectWithLines(120, () => now);
    const small = await projectWithLines(10, () => now);
    // Lines 1-5 are 40 days old, 6-8 29 days old, the rest new.
    const aged = await projectWithLines(12, (i) => new Date(now.getTime() - (i < 5 ? 40 : i < 8 ? 29 : 0) * DAY));
    const scope = h.runtime === "node-pglite" ? {} : { projectIds: [big, small, aged] };
    const result = await sweepLogs(h.db, { maxAgeDays: 30, maxLinesPerProject: 50 }, now, scope);
    expect(result).toEqual({ byAge: 5, byCount: 70 });
    const kept = await seqsOf(big);
    expect(kept.map((r) => r.seq)).toEqual(Array.from({ length: 50 }, (_, i) => 71 + i));
    expect(kept[0]!.message).toBe("line 71");
    expect(await seqsOf(small)).toHaveLength(10);
    expect((await seqsOf(aged)).map((r) => r.message)).toEqual(Array.from({ length: 7 }, (_, i) => `line ${i + 6}`));
    // Sweeping again removes nothing; new lines keep their numbers going.
    expect(await sweepLogs(h.db, { maxAgeDays: 30, maxLinesPerProject: 50 }, now, scope)).toEqual({ byAge: 0, byCount: 0 });
  });

  it("deletes in batches: a project far over the count is brought down in one sweep", async () => {
    const p = await projectWithLines(12_000);
    const result = await sweepLogs(h.db, { maxAgeDays: 30, maxLinesPerProject: 100 }, new Date(), { projectIds: [p] });
    expect(result.byCount).toBe(11_900);
    const kept = await seqsOf(p);
    expect(kept).toHaveLength(100);
    expect(kept[0]!.seq).toBe(11_901);
  });

  it("reads LOG_RETENTION_DAYS / LOG_RETENTION_LINES, defaults 30 days and 50,000 lines; refuses bad values naming them", () => {
    expect(DEFAULT_LOG_RETENTION).toEqual({ maxAgeDays: 30, maxLinesPerProject: 50_000 });
    expect(logRetentionFromEnv({})).toEqual(DEFAULT_LOG_RETENTION);
    expect(logRetentionFromEnv({ LOG_RETENTION_DAYS: "7", LOG_RETENTION_LINES: "1000" })).toEqual({ maxAgeDays: 7, maxLinesPerProject: 1000 });
    expect(() => logRetentionFromEnv({ LOG_RETENTION_DAYS: "0" })).toThrow(/LOG_RETENTION_DAYS/);
    expect(() => logRetentionFromEnv({ LOG_RETENTION_LINES: "lots" })).toThrow(/LOG_RETENTION_LINES/);
  });

  it.runIf(currentRuntime() === "worker")("the Worker's cron applies the default retention", async () => {
    const now = Date.now();
    const p = await projectWithLines(3, (i) => new Date(now - (i === 0 ? 31 : 1) * DAY));
    await (h as WorkerHarness).scheduled();
    expect((await seqsOf(p)).map((r) => r.message)).toEqual(["line 2", "line 3"]);
  });
});
