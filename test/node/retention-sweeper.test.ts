/**
 * The self-hosted retention timer (functions/operations/retention/sweeper.ts) on
 * the harness's own PGlite database: it sweeps at once when started, again every
 * interval, logs counts only, and stop() ends it. A bad setting stops the start
 * naming it (loadNodeConfig).
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { recordSystemAudit } from "../../functions/operations/audit/record";
import { DEFAULT_RETENTION } from "../../functions/operations/retention/settings";
import { startRetentionSweeper } from "../../functions/operations/retention/sweeper";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { auditLog } from "../../shared/db/schema";
import { jsonLogger } from "../../shared/http/logger";
import { eventually, seedTenant, useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";

const h = useHarness(pgliteHarness);
const DAY = 86_400_000;

describe("retention sweeper", () => {
  it("sweeps when started and on every interval until stopped", async () => {
    const t = await seedTenant(h);
    const row = (id: string, daysAgo: number) =>
      recordSystemAudit(h.db, t.orgId, { action: "project.deleted", target: { kind: "project", id } }, new Date(Date.now() - daysAgo * DAY));
    await row("old", 10);
    await row("new", 0);
    const logs: string[] = [];
    const sweeper = startRetentionSweeper({
      db: h.db,
      logger: jsonLogger((l) => logs.push(l)),
      settings: { ...DEFAULT_RETENTION, auditDays: 5 },
      intervalMs: 50,
    });
    const targets = async () => (await h.db.select({ id: auditLog.targetId }).from(auditLog).where(eq(auditLog.orgId, t.orgId))).map((r) => r.id).sort();
    await eventually(async () => expect(await targets()).toEqual(["new"]));
    await row("later", 6);
    await eventually(async () => expect(await targets()).toEqual(["new"]));
    expect(logs.some((l) => l.includes("retention sweep: removed rows") && l.includes('"audit"'))).toBe(true);
    await sweeper.stop();
    await row("after stop", 6);
    await new Promise((r) => setTimeout(r, 200));
    expect(await targets()).toEqual(["after stop", "new"]);
  });

  it("a bad setting stops the start, naming it", () => {
    const base = { SECRET_KEYS: undefined } as Record<string, string | undefined>;
    expect(() => loadNodeConfig({ ...base, AUDIT_RETENTION_DAYS: "forever" })).toThrow(/AUDIT_RETENTION_DAYS/);
    expect(() => loadNodeConfig({ ...base, LOG_RETENTION_REQUEST_LINES: "10" })).toThrow(/LOG_RETENTION_REQUEST_LINES/);
  });
});
