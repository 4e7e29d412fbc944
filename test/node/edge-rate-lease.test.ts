/**
 * The edge's rate-limit batcher on real Postgres: small limits take exactly
 * what waits; limits of LEASE_MIN_LIMIT or more lease units ahead so most
 * requests are granted without a statement, and the limit still holds exactly
 * in one process and is never exceeded across two.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createRateBatcher, LEASE_FRACTION, LEASE_MIN_LIMIT } from "../../functions/self-hosted/edge/rate-batcher";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import type { Db } from "../../shared/db/types";
import { type FreshDatabase, freshDatabase } from "../support/fresh-database";

let fresh: FreshDatabase;
let database: PostgresDatabase;

beforeAll(async () => {
  fresh = await freshDatabase(inject("pgUrl"), "edge_lease", { migrate: true });
  database = await openPostgres(fresh.url, { migrate: false, max: 4 });
}, 60_000);

afterAll(async () => {
  await database?.close();
  await fresh?.drop();
});

/** The database with its statements counted (the batcher's only statement is `execute`). */
function counted(db: Db) {
  const seen = { statements: 0 };
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== "execute") return value;
      return (...args: unknown[]) => {
        seen.statements++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { db: wrapped, seen };
}

/** `n` takes in bursts of `burst` concurrent requests (a busy client on keep-alive connections). */
async function takeMany(take: ReturnType<typeof createRateBatcher>, key: string, max: number, n: number, burst = 32) {
  let ok = 0;
  for (let done = 0; done < n; done += burst) {
    const results = await Promise.all(Array.from({ length: Math.min(burst, n - done) }, () => take(key, max, 60_000)));
    ok += results.filter((r) => r.ok).length;
  }
  return ok;
}

describe("edge rate-limit batcher (Postgres)", () => {
  it("a limit under LEASE_MIN_LIMIT takes exactly what waits: the limit holds, and nothing is leased", async () => {
    const { db, seen } = counted(database.db);
    const take = createRateBatcher(db, () => new Date());
    const key = `edge:small:${Date.now()}`;
    expect(await takeMany(take, key, 50, 200)).toBe(50);
    // Once the database said the window is used up, later requests are refused without a statement.
    const before = seen.statements;
    expect((await take(key, 50, 60_000)).ok).toBe(false);
    expect(seen.statements).toBe(before);
  });

  it(`a limit of ${LEASE_MIN_LIMIT}+ is leased: far fewer statements than requests, and exactly the limit granted`, async () => {
    const { db, seen } = counted(database.db);
    const take = createRateBatcher(db, () => new Date());
    const key = `edge:large:${Date.now()}`;
    const limit = 3000;
    expect(await takeMany(take, key, limit, 4000)).toBe(limit);
    expect(seen.statements).toBeLessThan(4000 / 8);
    const [row] = (await database.pool.query("select count from rate_limits where key = $1", [key])).rows;
    expect(Number(row.count)).toBe(limit);
  });

  it("two processes sharing one leased limit never exceed it, and lose at most one lease to each other", async () => {
    const a = createRateBatcher(database.db, () => new Date());
    const b = createRateBatcher(database.db, () => new Date());
    const key = `edge:shared:${Date.now()}`;
    const limit = 2000;
    const [okA, okB] = await Promise.all([takeMany(a, key, limit, 1500), takeMany(b, key, limit, 1500)]);
    expect(okA + okB).toBeLessThanOrEqual(limit);
    expect(okA + okB).toBeGreaterThanOrEqual(limit - Math.floor(limit / LEASE_FRACTION));
    expect(okA).toBeGreaterThan(0);
    expect(okB).toBeGreaterThan(0);
  });

  it("a raised limit grants again in the same window", async () => {
    const take = createRateBatcher(database.db, () => new Date());
    const key = `edge:raised:${Date.now()}`;
    expect(await takeMany(take, key, 2, 4)).toBe(2);
    expect(await takeMany(take, key, 5, 5)).toBe(3);
  });
});
