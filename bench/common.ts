/** What the benchmark scripts share: bounded integer settings and the admin connection. */
import pg from "pg";

/** An integer from the environment, within [min, max], else the fallback. */
export function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer in [${min}, ${max}], got '${raw}'`);
  return n;
}

/** The server each benchmark creates its own database on (and drops it afterwards). */
export const ADMIN_URL = process.env.BENCH_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

/** Runs `fn` on a short-lived admin connection (create and drop database). */
export async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}
