/**
 * The self-hosted log sweeper loop (functions/logs/sweeper.ts) on the harness's own
 * PGlite database: it sweeps at once when started, again every interval, and
 * stop() ends it.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { appendLogLines } from "../../functions/logs/store";
import { startLogSweeper } from "../../functions/logs/sweeper";
import { logLines } from "../../shared/db/schema";
import { jsonLogger } from "../../shared/http/logger";
import { eventually, useHarness, seedTenant } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectHelpers } from "../support/projects";

const h = useHarness(pgliteHarness);
const { create } = projectHelpers(h);

describe("log sweeper", () => {
  it("sweeps when started and on every interval until stopped", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const line = (message: string, daysAgo: number) => ({
      orgId: t.orgId,
      projectId: p.id,
      deploymentId: null,
      kind: "runtime" as const,
      stream: "stdout" as const,
      at: new Date(Date.now() - daysAgo * 86_400_000),
      message,
    });
    await appendLogLines(h.db, [line("old", 10), line("new", 0)]);
    const logs: string[] = [];
    const sweeper = startLogSweeper({ db: h.db, logger: jsonLogger((l) => logs.push(l)), retention: { maxAgeDays: 5, maxLinesPerProject: 2 }, intervalMs: 50 });
    const messages = async () => (await h.db.select({ m: logLines.message }).from(logLines).where(eq(logLines.projectId, p.id))).map((r) => r.m).sort();
    await eventually(async () => expect(await messages()).toEqual(["new"]));
    // Over the count: the next run (50 ms later) keeps the newest two.
    await appendLogLines(h.db, [line("n2", 0), line("n3", 0)]);
    await eventually(async () => expect(await messages()).toEqual(["n2", "n3"]));
    expect(logs.some((l) => l.includes("log sweep: removed lines"))).toBe(true);
    await sweeper.stop();
    await appendLogLines(h.db, [line("n4", 0)]);
    await new Promise((r) => setTimeout(r, 200));
    expect(await messages()).toEqual(["n2", "n3", "n4"]);
  });
});
