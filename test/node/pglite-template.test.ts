/**
 * A fresh embedded database starts as a copy of the migrated template
 * (shared/db/pglite-template.ts): it must be the same database a fresh initdb and
 * every migration give, hold nothing of another instance, and be remade for other
 * code.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CODE_MIGRATIONS } from "../../shared/db/migration-level";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { ensureTemplate, isInitialised, seedDataDir, templateKey } from "../../shared/db/pglite-template";

const scratch = mkdtempSync(join(tmpdir(), "pglite-template-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every column, index and constraint of the public schema, and the migrations recorded: what the code relies on. */
async function catalog(database: PgliteDatabase) {
  const q = async (sql: string) => (await database.client.query(sql)).rows;
  return {
    columns: await q(
      "select table_name, column_name, data_type, is_nullable, column_default from information_schema.columns where table_schema = 'public' order by 1, 2",
    ),
    indexes: await q("select tablename, indexname, indexdef from pg_indexes where schemaname = 'public' order by 1, 2"),
    constraints: await q(
      "select conrelid::regclass::text as t, conname, pg_get_constraintdef(oid) as def from pg_constraint where connamespace = 'public'::regnamespace order by 1, 2",
    ),
    migrations: await q("select hash, created_at from drizzle.__drizzle_migrations order by id"),
  };
}

/** Rows in every public table: a template must have none. */
async function rowCount(database: PgliteDatabase): Promise<number> {
  const tables = (await database.client.query<{ t: string }>("select quote_ident(tablename) as t from pg_tables where schemaname = 'public'")).rows;
  let n = 0;
  for (const { t } of tables) n += Number((await database.client.query<{ n: string }>(`select count(*)::text as n from ${t}`)).rows[0]!.n);
  return n;
}

describe("PGlite data directory template", () => {
  it("a data directory seeded from the template is the database initdb and every migration give, empty, with the migrations reported as applied", async () => {
    const fromScratch = await openPglite({ dataDir: join(scratch, "initdb") });
    const seededDir = join(scratch, "seeded");
    const seeded = await openPglite({ dataDir: seededDir, template: true });
    try {
      expect(isInitialised(seededDir)).toBe(true);
      // The first start's line lists the migrations either way.
      const every = CODE_MIGRATIONS.map((m) => m.tag);
      expect(fromScratch.migrated).toEqual(every);
      expect(seeded.migrated).toEqual(every);
      expect(await catalog(seeded)).toEqual(await catalog(fromScratch));
      expect(await rowCount(seeded)).toBe(0);
      // It is a database of its own: a write here is not in the next copy.
      await seeded.client.query("insert into organizations (id, name) values ('org_template_probe', 'probe')");
    } finally {
      await seeded.close();
      await fromScratch.close();
    }
    const next = await openPglite({ dataDir: join(scratch, "seeded-2"), template: true });
    const reopened = await openPglite({ dataDir: seededDir, template: true });
    try {
      expect(await rowCount(next)).toBe(0);
      // An existing data directory is opened as it is: nothing applied, nothing copied over it.
      expect(reopened.migrated).toEqual([]);
      expect((await reopened.client.query("select id from organizations")).rows).toEqual([{ id: "org_template_probe" }]);
    } finally {
      await next.close();
      await reopened.close();
    }
  });

  it("is made ahead of any start by npm's postinstall (ensureTemplate), and a data directory then only copies it", async () => {
    const root = join(scratch, "installed");
    let makes = 0;
    const make = async (dir: string) => {
      makes++;
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "PG_VERSION"), "17\n");
    };
    expect(await ensureTemplate(make, root)).toBe("made");
    expect(await ensureTemplate(make, root)).toBe("existing");
    expect(await seedDataDir(join(scratch, "after-install"), make, root)).toBe("template");
    expect(makes).toBe(1);
  });

  it("makes the template once per key, replaces templates of other code, and falls back to initdb where it cannot write", async () => {
    const root = join(scratch, "templates");
    // A template of other code (another PGlite or migration set) is never copied, and is removed once a current one exists.
    mkdirSync(join(root, "0000000000000000"), { recursive: true });
    writeFileSync(join(root, "0000000000000000", "PG_VERSION"), "17\n");
    let makes = 0;
    const make = async (dir: string) => {
      makes++;
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "PG_VERSION"), "17\n");
      writeFileSync(join(dir, "made"), String(makes));
    };
    expect(await seedDataDir(join(scratch, "a"), make, root)).toBe("template");
    expect(await seedDataDir(join(scratch, "b"), make, root)).toBe("template");
    expect(makes).toBe(1);
    // npm's postinstall (ensureTemplate) finds it made: nothing made again.
    expect(await ensureTemplate(make, root)).toBe("existing");
    expect(makes).toBe(1);
    expect(readdirSync(root)).toEqual([templateKey()]);
    expect(readdirSync(join(scratch, "b")).sort()).toEqual(["PG_VERSION", "made"]);
    // Initialised already: left alone.
    expect(await seedDataDir(join(scratch, "b"), make, root)).toBe("existing");

    // A root that cannot be created (here its parent is a file; a read-only install alike): PGlite's own initdb, and the data directory left empty for it.
    writeFileSync(join(scratch, "not-a-dir"), "");
    const dataDir = join(scratch, "c");
    expect(await seedDataDir(dataDir, make, join(scratch, "not-a-dir", "templates"))).toBe("initdb");
    expect(isInitialised(dataDir)).toBe(false);
    // A template that fails half-way leaves no partial template and no partial data directory.
    const failing = async (dir: string) => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "PG_VERSION"), "17\n");
      throw new Error("killed");
    };
    const other = join(scratch, "templates-2");
    expect(await seedDataDir(join(scratch, "d"), failing, other)).toBe("initdb");
    expect(readdirSync(other)).toEqual([]);
    expect(isInitialised(join(scratch, "d"))).toBe(false);
  });
});
