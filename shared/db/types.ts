import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import type * as schema from "./schema";

export type Schema = typeof schema;

/** A drizzle database over any of the three drivers (PGlite, node-postgres, Neon). */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

/** A transaction handle; inside `db.transaction` always use it, never the outer `db`. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** Anything queries can run on: the database or an open transaction. */
export type Executor = Db | Tx;
