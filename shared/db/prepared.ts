/**
 * Named prepared statements, built once per database handle. Postgres then
 * parses and plans a hot query once per connection instead of on every request,
 * and drizzle skips rebuilding the SQL: on the authenticated hot path this is
 * most of the cost of a request.
 */
import type { Db } from "./types";

export function preparedStatement<P>(build: (db: Db) => P): (db: Db) => P {
  const cache = new WeakMap<Db, P>();
  return (db) => {
    let statement = cache.get(db);
    if (!statement) {
      statement = build(db);
      cache.set(db, statement);
    }
    return statement;
  };
}
