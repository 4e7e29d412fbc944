/**
 * copyLogLines (functions/logs/copy-lines.ts), the log writer's COPY path on node-postgres: every value is
 * stored exactly as appendLogLines (store.ts) stores it (COPY's text escapes: backslash, tab, newline,
 * carriage return; NULL; a NUL byte as U+FFFD), both share each project's counter, a batch spanning
 * several CopyData messages arrives whole, a refused batch rolls back whole and its connection goes on
 * serving, and createLogWriter on Postgres keeps the other projects' lines when one project is gone.
 */
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { copyLogLines } from "../../functions/logs/copy-lines";
import { appendLogLines, type NewLogLine } from "../../functions/logs/store";
import { createLogWriter } from "../../functions/logs/writer";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { deployments, environments, logLines, organizations, projects } from "../../shared/db/schema";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";
import { type FreshDatabase, freshDatabase } from "../support/fresh-database";

let fresh: FreshDatabase;
let database: PostgresDatabase;
const orgId = newId("org");

beforeAll(async () => {
  fresh = await freshDatabase(inject("pgUrl"), "logs_copy", { migrate: true });
  database = await openPostgres(fresh.url, { migrate: false, max: 2 });
  await database.db.insert(organizations).values({ id: orgId, name: "Copy" });
}, 60_000);

afterAll(async () => {
  await database?.close();
  await fresh?.drop();
});

async function project(): Promise<{ projectId: string; deploymentId: string }> {
  const projectId = newId("prj");
  const environmentId = newId("env");
  const deploymentId = newId("dpl");
  await database.db
    .insert(projects)
    .values({ id: projectId, orgId, name: projectId, slug: projectId.toLowerCase().replace(/_/g, "-"), sleepMode: "always_on" });
  await database.db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
  await database.db
    .insert(deployments)
    .values({ id: deploymentId, orgId, projectId, environmentId, status: "ready", current: true, port: 1, servedBy: "t", source: "git" });
  return { projectId, deploymentId };
}

const rowsOf = (projectId: string) => database.db.select().from(logLines).where(eq(logLines.projectId, projectId)).orderBy(asc(logLines.seq));

const AWKWARD = [
  'say "hi" \\ {a,b} NULL',
  "tab\there\tand\\there",
  "two\nlines\r\nand a \\n that is not one",
  "\\N",
  "\u001b[1;32m✓\u001b[0m 名前 🚀",
  "",
  "bin\0ary",
];

describe("copyLogLines", () => {
  it("stores every value as appendLogLines does, and both number from the same counter", async () => {
    const viaInsert = await project();
    const viaCopy = await project();
    const at = new Date("2031-02-03T04:05:06.789Z");
    const lines = (p: { projectId: string; deploymentId: string }): NewLogLine[] => [
      ...AWKWARD.map((message, i) => ({
        orgId,
        projectId: p.projectId,
        deploymentId: i % 2 ? null : p.deploymentId,
        kind: "runtime" as const,
        stream: "stderr" as const,
        at,
        message,
      })),
      {
        orgId,
        projectId: p.projectId,
        deploymentId: p.deploymentId,
        kind: "runtime",
        stream: "stdout",
        at,
        message: "GET /a 200 1ms",
        fields: { process: "web", path: '/a"b\\c\td', status: 200, nested: { x: [1, null, "\n"] }, rule: null },
      },
    ];
    await appendLogLines(database.db, lines(viaInsert));
    await copyLogLines(database.pool, lines(viaCopy));
    const shape = (rows: Array<typeof logLines.$inferSelect>) =>
      rows.map((r) => [r.seq, r.kind, r.stream, r.message, r.fields, r.deploymentId === null, r.at.toISOString()]);
    const inserted = await rowsOf(viaInsert.projectId);
    const copied = await rowsOf(viaCopy.projectId);
    expect(shape(copied)).toEqual(shape(inserted));
    expect(copied.map((r) => r.message)).toEqual([...AWKWARD.slice(0, -1), "bin\uFFFDary", "GET /a 200 1ms"]);

    // Either path goes on from the other's last number.
    await appendLogLines(database.db, [{ ...lines(viaCopy)[0]!, message: "after copy" }]);
    await copyLogLines(database.pool, [{ ...lines(viaCopy)[0]!, message: "after insert" }]);
    expect((await rowsOf(viaCopy.projectId)).slice(-2).map((r) => [r.seq, r.message])).toEqual([
      [AWKWARD.length + 2, "after copy"],
      [AWKWARD.length + 3, "after insert"],
    ]);
  });

  it("a batch of several projects over many CopyData messages arrives whole, each project numbered densely", async () => {
    const a = await project();
    const b = await project();
    const long = "x".repeat(1000);
    const line = (p: { projectId: string }, i: number): NewLogLine => ({
      orgId,
      projectId: p.projectId,
      deploymentId: null,
      kind: "runtime",
      stream: "stdout",
      at: new Date(),
      message: `${i} ${long}`,
    });
    // ~1.2 MB of text: several 256 KiB messages.
    await copyLogLines(
      database.pool,
      Array.from({ length: 1200 }, (_, i) => line(i % 3 ? a : b, i)),
    );
    const rowsA = await rowsOf(a.projectId);
    const rowsB = await rowsOf(b.projectId);
    expect(rowsA.map((r) => r.seq)).toEqual(Array.from({ length: 800 }, (_, i) => i + 1));
    expect(rowsB.map((r) => r.seq)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    expect(rowsB.at(-1)!.message).toBe(`1197 ${long}`);
  });

  it("a refused batch stores nothing, moves no counter, and leaves the pool serving", async () => {
    const p = await project();
    const line = (projectId: string, message: string): NewLogLine => ({
      orgId,
      projectId,
      deploymentId: null,
      kind: "runtime",
      stream: "stdout",
      at: new Date(),
      message,
    });
    await expect(copyLogLines(database.pool, [line(p.projectId, "kept?"), line("prj_gone", "orphan")])).rejects.toThrow();
    expect(await rowsOf(p.projectId)).toEqual([]);
    // Both connections of the pool (max 2) are usable afterwards, and the counter starts at 1.
    await Promise.all([copyLogLines(database.pool, [line(p.projectId, "one")]), database.pool.query("select 1")]);
    expect((await rowsOf(p.projectId)).map((r) => [r.seq, r.message])).toEqual([[1, "one"]]);
  });

  it("createLogWriter on Postgres: one project gone keeps the other projects' lines", async () => {
    const kept = await project();
    const writer = createLogWriter({ db: database.db, logger: silentLogger });
    const line = (projectId: string, message: string): NewLogLine => ({
      orgId,
      projectId,
      deploymentId: null,
      kind: "runtime",
      stream: "stdout",
      at: new Date(),
      message,
    });
    writer.write(line(kept.projectId, "before"));
    writer.write(line("prj_deleted_meanwhile", "orphan"));
    writer.write(line(kept.projectId, "after"));
    await writer.flush();
    expect((await rowsOf(kept.projectId)).map((r) => r.message)).toEqual(["before", "after"]);
    expect(writer.dropped).toBe(1);
  });
});
