/**
 * appendLogLines (functions/logs/store.ts) stores every value as sent through its
 * one-JSON-parameter INSERT: quotes, backslashes, braces, Unicode, ANSI (a NUL,
 * which Postgres text cannot hold, as U+FFFD instead of failing the batch),
 * null deployments, structured fields, several projects in one call, and a batch
 * larger than one statement's chunk, numbered densely per project.
 */
import { asc, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { appendLogLines, type NewLogLine } from "../../functions/logs/store";
import { createLogWriter } from "../../functions/logs/writer";
import { silentLogger } from "../../shared/http/logger";
import { logLines } from "../../shared/db/schema";
import { seedTenant, useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectHelpers } from "../support/projects";

const h = useHarness(pgliteHarness);
const { create } = projectHelpers(h);

describe("appendLogLines", () => {
  it("stores awkward text and fields exactly, numbering each project's lines densely", async () => {
    const t = await seedTenant(h);
    const a = await create(t);
    const b = await create(t);
    const awkward = ['say "hi" \\ {a,b} NULL', "tab\there, comma, 'quote'", "\u001b[1;32m✓\u001b[0m 名前 🚀", "", "NULL"];
    const at = new Date("2031-02-03T04:05:06.789Z");
    const line = (projectId: string, message: string, fields: Record<string, unknown> | null = null): NewLogLine => ({
      orgId: t.orgId,
      projectId,
      deploymentId: null,
      kind: "runtime",
      stream: "stdout",
      at,
      message,
      fields,
    });
    await appendLogLines(h.db, [
      ...awkward.map((m) => line(a.id, m)),
      line(b.id, "GET /", { process: "web", path: '/a"b\\c', status: 200, nested: { x: [1, null] } }),
      ...Array.from({ length: 4500 }, (_, i) => line(b.id, `bulk ${i}`)),
    ]);
    const rowsA = await h.db.select().from(logLines).where(eq(logLines.projectId, a.id)).orderBy(asc(logLines.seq));
    expect(rowsA.map((r) => [r.seq, r.message, r.fields, r.deploymentId, r.at.toISOString()])).toEqual(
      awkward.map((m, i) => [i + 1, m, null, null, at.toISOString()]),
    );
    const rowsB = await h.db.select().from(logLines).where(eq(logLines.projectId, b.id)).orderBy(asc(logLines.seq));
    expect(rowsB.map((r) => r.seq)).toEqual(Array.from({ length: 4501 }, (_, i) => i + 1));
    expect(rowsB[0]).toMatchObject({ kind: "runtime", fields: { process: "web", path: '/a"b\\c', status: 200, nested: { x: [1, null] } } });
    expect(rowsB.at(-1)!.message).toBe("bulk 4499");
    // The counter goes on from there.
    await appendLogLines(h.db, [line(a.id, "next")]);
    const [next] = await h.db.select().from(logLines).where(eq(logLines.message, "next"));
    expect(next!.seq).toBe(awkward.length + 1);
  });

  it("stores a line holding NUL bytes (as U+FFFD) with the rest of its batch", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const line = (message: string): NewLogLine => ({
      orgId: t.orgId,
      projectId: p.id,
      deploymentId: null,
      kind: "runtime",
      stream: "stdout",
      at: new Date(),
      message,
    });
    await appendLogLines(h.db, [line("before"), line("bin\0ary\0"), line("after")]);
    const rows = await h.db.select().from(logLines).where(eq(logLines.projectId, p.id)).orderBy(asc(logLines.seq));
    expect(rows.map((r) => r.message)).toEqual(["before", "bin\uFFFDary\uFFFD", "after"]);
  });
});

describe("createLogWriter", () => {
  it("a batch whose lines of one project cannot be stored (the project is gone) keeps the other projects' lines", async () => {
    const t = await seedTenant(h);
    const kept = await create(t);
    const line = (projectId: string, message: string): NewLogLine => ({
      orgId: t.orgId,
      projectId,
      deploymentId: null,
      kind: "runtime",
      stream: "stdout",
      at: new Date(),
      message,
    });
    const writer = createLogWriter({ db: h.db, logger: silentLogger });
    writer.write(line(kept.id, "before"));
    writer.write(line("prj_deleted_meanwhile", "orphan"));
    writer.write(line(kept.id, "after"));
    await writer.flush();
    const rows = await h.db.select().from(logLines).where(eq(logLines.projectId, kept.id)).orderBy(asc(logLines.seq));
    expect(rows.map((r) => r.message)).toEqual(["before", "after"]);
    expect(writer.dropped).toBe(1);
  });
});
