/**
 * An unexpected database failure is logged with its SQL statement, never with
 * the statement's parameters (they carry request values). A trigger that fails
 * every env var insert stands in for a database fault, on a database of its own.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { jsonLogger } from "../../shared/http/logger";
import { createApp } from "../../functions/app";
import { buildRequest, expectProblem, expectStatus, seedTenant, type Harness } from "../support/harness";
import { freshDatabase, type FreshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const CANARY = "CANARY-param-7f3a9c";
const real = inject("pgKind") === "postgres";

describe.runIf(real)("unhandled errors in the log", () => {
  let fresh: FreshDatabase;
  let database: PostgresDatabase;
  const logs: string[] = [];
  let h: Harness;

  beforeAll(async () => {
    fresh = await freshDatabase(new URL("/postgres", inject("pgUrl")).toString(), "ws_errlog", { migrate: true });
    database = await openPostgres(fresh.url, { migrate: false });
    await database.pool.query(`
      create function refuse_env_insert() returns trigger language plpgsql as $$
      begin raise exception 'env store unavailable for "%"', new.key; end $$;
      create trigger refuse_env_insert before insert on env_vars for each row execute function refuse_env_insert();`);
    const keyring = await createKeyring(TEST_SECRET_KEYS);
    const app = createApp({
      services: () => ({ db: database.db, keyring, config: { mode: "self-hosted", sharedDomain: "apps.test" } }),
      logger: jsonLogger((line) => logs.push(line)),
    });
    h = {
      runtime: "node-postgres",
      realConcurrency: true,
      db: database.db,
      keyring,
      logs,
      request: async (p, i) => app.fetch(buildRequest(p, i)),
      close: async () => {},
    };
  });

  afterAll(async () => {
    await database?.close();
    await fresh?.drop();
  });

  it("logs the failed statement and the database's error code, not the parameters", async () => {
    const t = await seedTenant(h);
    const project = await expectStatus<{ id: string }>(await h.request("/api/projects", { token: t.token, json: { name: "p" } }), 201);
    const res = await h.request(`/api/projects/${project.id}/env`, {
      method: "PATCH",
      token: t.token,
      json: { upserts: [{ key: "CANARY_KEY", value: CANARY }] },
    });
    const problem = await expectProblem(res, 500);
    expect(JSON.stringify(problem)).not.toContain(CANARY);
    const line = logs.find((l) => l.includes("unhandled error"));
    expect(line).toBeDefined();
    const entry = JSON.parse(line!);
    expect(entry.query).toMatch(/insert into "env_vars"/i);
    expect(entry.cause.code).toBe("P0001");
    expect(entry.requestId).toBe(problem.requestId);
    expect(logs.join("\n")).not.toContain(CANARY);
    // The database's message quoted the key: left out too.
    expect(logs.join("\n")).not.toContain("CANARY_KEY");
  });
});
