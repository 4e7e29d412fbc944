/**
 * Database time and pool, measured at the driver, the one place every query
 * passes (start.ts hands over the database it opened): each statement's time
 * from the driver's call to its answer, whatever drizzle builds above it.
 * - Postgres (node-postgres): every pooled client's `query` (pool.query and
 *   transactions both go through pool.connect), and the pool's gauges.
 * - PGlite (the worker client): `query` and `exec`, inside transactions too.
 *   The embedded database has no pool (one connection, one statement at a time).
 */
import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";
import { Gauge, Histogram, type Registry } from "prom-client";

type Observe = (seconds: number) => void;

/** Replaces obj[name] with a timed call: a returned promise is timed to its settling, a trailing callback to its call. */
function timeMethod(obj: object, name: string, observe: Observe): void {
  const target = obj as Record<string, (...args: unknown[]) => unknown>;
  const original = target[name];
  if (typeof original !== "function") return;
  target[name] = function (this: unknown, ...args: unknown[]) {
    const started = performance.now();
    const done = () => observe((performance.now() - started) / 1000);
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === "function") {
      args[last] = (...r: unknown[]) => {
        done();
        return callback(...r);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args);
    // The caller handles the promise's failure; this branch only reads when it settled.
    if (result instanceof Promise) result.then(done, done);
    return result;
  };
}

/** node-postgres: every client the pool hands out (once each), and the pool's sizes at scrape time. */
function instrumentPool(pool: pg.Pool, observe: Observe, registry: Registry): void {
  const timed = new WeakSet<object>();
  const time = (client: unknown) => {
    if (client && typeof client === "object" && !timed.has(client)) {
      timed.add(client);
      timeMethod(client, "query", observe);
    }
  };
  const connect = pool.connect.bind(pool) as (cb?: (err: Error | undefined, client: unknown, release: unknown) => void) => unknown;
  // pool.query calls this.connect(callback); a transaction awaits pool.connect().
  (pool as unknown as { connect: typeof connect }).connect = (cb) => {
    if (cb)
      return connect((err, client, release) => {
        time(client);
        cb(err, client, release);
      });
    return (connect() as Promise<unknown>).then((client) => {
      time(client);
      return client;
    });
  };
  const sizes = new Gauge({
    name: "wsp_db_pool_connections",
    help: "Postgres pool connections by state: total (open), idle, waiting (requests queued for a connection; above 0 the pool is the bottleneck).",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      this.set({ state: "total" }, pool.totalCount);
      this.set({ state: "idle" }, pool.idleCount);
      this.set({ state: "waiting" }, pool.waitingCount);
    },
  });
  void sizes;
}

/** PGlite's worker client: query and exec, and the same two of each transaction's handle. */
function instrumentPglite(client: PGlite, observe: Observe): void {
  timeMethod(client, "query", observe);
  timeMethod(client, "exec", observe);
  const transaction = client.transaction.bind(client);
  client.transaction = ((callback: (tx: object) => Promise<unknown>) =>
    transaction((tx) => {
      timeMethod(tx, "query", observe);
      timeMethod(tx, "exec", observe);
      return callback(tx);
    })) as PGlite["transaction"];
}

/** Registers wsp_db_query_duration_seconds (and the pool's gauges on Postgres) on `registry`. */
export function instrumentDatabase(database: { pool?: pg.Pool; client?: PGlite }, registry: Registry): void {
  const queries = new Histogram({
    name: "wsp_db_query_duration_seconds",
    help: "Time of each database statement, from the driver's call to its answer (a statement waiting for a pool connection counts from when it got one).",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const observe: Observe = (s) => queries.observe(s);
  if (database.pool) instrumentPool(database.pool, observe, registry);
  else if (database.client) instrumentPglite(database.client, observe);
}
