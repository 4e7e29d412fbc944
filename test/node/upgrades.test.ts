/**
 * Upgrades: migrations run under an advisory lock (processes starting at once
 * migrate once); a database migrated by a newer version is refused at start with
 * both levels named (Postgres and PGlite); a database created by the first
 * released schema (migration 0000) with data in it is upgraded through every
 * migration and its rows read back through the API.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { createApp } from "../../functions/app";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted } from "../../functions/self-hosted/start";
import { cloneTokenPatch } from "../../functions/settings/store";
import { storedRequestLines } from "../support/request-lines";
import { hashToken } from "../../shared/auth/tokens";
import { createKeyring } from "../../shared/crypto/keyring";
import { CODE_MIGRATIONS, LATEST_MIGRATION } from "../../shared/db/migration-level";
import { MIGRATIONS_DIR } from "../../shared/db/migrations-dir";
import { openPglite } from "../../shared/db/pglite";
import { migratePostgres, openPostgres } from "../../shared/db/postgres";
import { silentLogger } from "../../shared/http/logger";
import { useCleanups } from "../support/cleanups";
import { freshDatabase } from "../support/fresh-database";
import { buildRequest, expectStatus } from "../support/harness";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const { cleanups, tempDir } = useCleanups("ws-upgrade-");
const real = inject("pgKind") === "postgres";
const ALL_TAGS = CODE_MIGRATIONS.map((m) => m.tag);
const NEXT_LEVEL = String(CODE_MIGRATIONS.length).padStart(4, "0");
/** A migration from a version after this one: a journal time past the code's latest. */
const FUTURE = { hash: "0".repeat(64), when: LATEST_MIGRATION.when + 86_400_000 };
const REFUSAL = new RegExp(
  `newer version of workspace-service: it is at migration ${NEXT_LEVEL} \\(1 migration this code does not know\\), this code's latest is ${LATEST_MIGRATION.tag}. Refusing to start`,
);

async function fresh(prefix: string) {
  const db = await freshDatabase(inject("pgUrl"), prefix);
  cleanups.push(() => db.drop());
  return db;
}

/** A pool whose idle connections may be cut by the database's drop without failing the run. */
function poolOf(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on("error", () => {});
  return pool;
}

async function recorded(pool: pg.Pool): Promise<{ hash: string; created_at: string }[]> {
  return (await pool.query("select hash, created_at::text from drizzle.__drizzle_migrations order by id")).rows;
}

describe.runIf(real)("migrations on Postgres", () => {
  it("three processes migrating a fresh database at once: all succeed, each migration applied once", async () => {
    const db = await fresh("ws_upgrade_race");
    const pools = [1, 2, 3].map(() => poolOf(db.url));
    cleanups.push(() => Promise.all(pools.map((p) => p.end())).then(() => {}));
    const applied = await Promise.all(pools.map((p) => migratePostgres(p)));
    // One of them applied everything; the others waited on the lock and found nothing left.
    expect(applied.flat().sort()).toEqual([...ALL_TAGS].sort());
    expect(applied.filter((a) => a.length > 0)).toHaveLength(1);
    const rows = await recorded(pools[0]!);
    expect(rows.map((r) => Number(r.created_at))).toEqual(CODE_MIGRATIONS.map((m) => m.when));
  });

  it("a database migrated by a newer version is refused, naming its level and the code's, and left as it was", async () => {
    const db = await fresh("ws_upgrade_newer");
    const pool = poolOf(db.url);
    cleanups.push(() => pool.end());
    await migratePostgres(pool);
    await pool.query("insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)", [FUTURE.hash, FUTURE.when]);
    await expect(openPostgres(db.url)).rejects.toThrow(REFUSAL);
    expect(await recorded(pool)).toHaveLength(CODE_MIGRATIONS.length + 1);
    // The lock was released: a later start is refused the same way, not blocked.
    await expect(openPostgres(db.url)).rejects.toThrow(REFUSAL);
  });

  it("a database created by migration 0000 with data in it upgrades through every migration; its rows read back through the API", async () => {
    const db = await fresh("ws_upgrade_0000");
    const pool = poolOf(db.url);
    cleanups.push(() => pool.end());
    // The first released schema, applied and recorded exactly as drizzle's migrator did then.
    const first = CODE_MIGRATIONS[0]!;
    const sqlText = readFileSync(join(MIGRATIONS_DIR, `${first.tag}.sql`), "utf8");
    for (const statement of sqlText.split("--> statement-breakpoint")) await pool.query(statement);
    await pool.query("create schema drizzle; create table drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)");
    await pool.query("insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)", [
      createHash("sha256").update(sqlText).digest("hex"),
      first.when,
    ]);

    // What 0000 held: an organization, its owner and a viewer, the owner's token, a settings row with an encrypted clone token.
    const keyring = await createKeyring(TEST_SECRET_KEYS);
    const token = `wsp_upgrade${"x".repeat(40)}`;
    await pool.query(`insert into organizations (id, name) values ('org_up', 'Upgraded Org')`);
    await pool.query(
      `insert into users (id, email, name, default_org_id) values ('usr_owner', 'owner@up.test', 'Owner', 'org_up'), ('usr_viewer', 'viewer@up.test', 'Viewer', 'org_up')`,
    );
    await pool.query(`insert into memberships (org_id, user_id, role) values ('org_up', 'usr_owner', 'owner'), ('org_up', 'usr_viewer', 'viewer')`);
    await pool.query("insert into api_tokens (id, user_id, name, token_hash, display_prefix) values ('tok_up', 'usr_owner', 'ci', $1, 'wsp_upgr')", [
      hashToken(token),
    ]);
    const clone = await cloneTokenPatch(keyring, { orgId: "org_up", userId: "usr_owner" }, "ghp_clone-token-canary", true, new Date());
    await pool.query(
      "insert into workspace_settings (org_id, user_id, build_mode, clone_token_ciphertext, clone_token_set_at, clone_token_as_default) values ('org_up', 'usr_owner', 'auto', $1, now(), true)",
      [clone.cloneTokenCiphertext],
    );

    const database = await openPostgres(db.url, { max: 2 });
    cleanups.push(() => database.close());
    expect(database.migrated).toEqual(ALL_TAGS.slice(1));

    const app = createApp({ services: () => ({ db: database.db, keyring, config: { mode: "self-hosted", sharedDomain: "apps.test" } }), logger: silentLogger });
    const call = (path: string, init: Parameters<typeof buildRequest>[1] = {}) => app.fetch(buildRequest(path, { token, ...init }));
    const me = await expectStatus(await call("/api/me"), 200);
    expect(me.user).toEqual({ id: "usr_owner", email: "owner@up.test", name: "Owner" });
    expect(me.organizations).toEqual([{ id: "org_up", name: "Upgraded Org", role: "owner" }]);
    const members = await expectStatus(await call("/api/orgs/org_up/members"), 200);
    expect(JSON.stringify(members)).toContain("viewer@up.test");
    const settings = await expectStatus(await call("/api/settings"), 200);
    expect(JSON.stringify(settings)).toContain('"hasToken":true');
    expect(JSON.stringify(settings)).not.toContain("canary");
    // What later migrations added works on the upgraded rows: a project with a variable.
    const project = await expectStatus<{ id: string }>(await call("/api/projects", { json: { name: "after upgrade" } }), 201);
    await expectStatus(await call(`/api/projects/${project.id}/env`, { method: "PATCH", json: { upserts: [{ key: "GREETING", value: "hi" }] } }), 200);
    expect(JSON.stringify(await expectStatus(await call(`/api/projects/${project.id}/env`), 200))).toContain("GREETING");
    expect(await expectStatus(await app.fetch(buildRequest("/readyz")), 200)).toMatchObject({ checks: { migrations: "ok" } });
  });
});

describe("migrations on PGlite", () => {
  it("a reopened data directory applies only what it lacks: the newest migration when it is behind by one, nothing when current", async () => {
    const dataDir = tempDir();
    const first = await openPglite({ dataDir });
    expect(first.migrated).toEqual(ALL_TAGS);
    // Undo the newest migration (0032: request lines moved from log_lines to request_log_batches) and its record: one
    // level behind, with a request line as the edge wrote it before (a row of log_lines with JSON fields).
    await first.client.exec(`
      drop table request_log_batches;
      insert into organizations (id, name) values ('org_up', 'Up');
      insert into projects (id, org_id, name, slug) values ('prj_up', 'org_up', 'up', 'up');
      insert into log_sequences (project_id, last) values ('prj_up', 2);
      insert into log_lines (project_id, seq, org_id, deployment_id, kind, stream, at, message, fields) values
        ('prj_up', 1, 'org_up', null, 'runtime', 'stdout', '2031-01-02T03:04:05.678Z', 'app line', null),
        ('prj_up', 2, 'org_up', 'dpl_gone', 'request', 'system', '2031-01-02T03:04:06.789Z', 'GET /a 404 7ms',
         '{"method":"GET","host":"up.apps.test","path":"/a\\tb\\\\c","status":404,"durationMs":7,"bytes":12,"clientAddress":"203.0.113.9","environment":"production","rule":null}');`);
    await first.client.query("delete from drizzle.__drizzle_migrations where created_at = $1", [LATEST_MIGRATION.when]);
    await first.close();

    const behind = await openPglite({ dataDir });
    expect(behind.migrated).toEqual([LATEST_MIGRATION.tag]);
    const kinds = await behind.client.query<{ kind: string }>("select kind from log_lines where project_id = 'prj_up'");
    expect(kinds.rows).toEqual([{ kind: "runtime" }]);
    expect(await storedRequestLines(behind.db, "prj_up")).toEqual([
      {
        seq: 2,
        projectId: "prj_up",
        at: Date.parse("2031-01-02T03:04:06.789Z"),
        deploymentId: "dpl_gone",
        method: "GET",
        host: "up.apps.test",
        path: "/a\tb\\c",
        status: 404,
        durationMs: 7,
        bytes: 12,
        clientAddress: "203.0.113.9",
        environment: "production",
        rule: null,
      },
    ]);
    await behind.close();

    const current = await openPglite({ dataDir });
    expect(current.migrated).toEqual([]);
    const times = (await current.client.query<{ at: string }>("select created_at::text as at from drizzle.__drizzle_migrations order by id")).rows;
    expect(times.map((r) => Number(r.at))).toEqual(CODE_MIGRATIONS.map((m) => m.when));
    await current.close();
  });

  it("a data directory migrated by a newer version is refused at start, naming both levels", async () => {
    const dataDir = tempDir();
    const config = loadNodeConfig({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", DATA_DIR: dataDir, RUNNER: "off" });
    const server = await startSelfHosted(config, () => {});
    await server.close();
    const embedded = await openPglite({ dataDir: join(dataDir, "pglite"), migrate: false });
    await embedded.client.query("insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)", [FUTURE.hash, FUTURE.when]);
    await embedded.close();

    const lines: string[] = [];
    await expect(startSelfHosted(config, (l) => lines.push(l))).rejects.toThrow(REFUSAL);
    expect(lines.some((l) => l.startsWith("Migrations:"))).toBe(false);
    // The lock on DATA_DIR was released: the refusal is the same, not "another process".
    await expect(startSelfHosted(config, () => {})).rejects.toThrow(REFUSAL);
  });
});
