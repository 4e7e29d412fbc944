/**
 * Feeds the auth cache from the database's `workspace_auth` notifications (Node
 * adapter only). On Postgres a dedicated connection LISTENs and reconnects with
 * backoff; while it is down the cache is bypassed. PGlite delivers the
 * notifications of its own single connection.
 */
import type { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { AUTH_CHANNEL, type AuthCache } from "./auth-cache";

export interface Stoppable {
  stop(): Promise<void>;
}

export async function listenPglite(client: PGlite, cache: AuthCache): Promise<Stoppable> {
  const unlisten = await client.listen(AUTH_CHANNEL, (userId) => cache.invalidate(userId || undefined));
  return { stop: () => unlisten() };
}

export async function listenPostgres(url: string, cache: AuthCache): Promise<Stoppable> {
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let delay = 250;

  const connect = async (): Promise<void> => {
    cache.setActive(false);
    const next = new pg.Client({ connectionString: url });
    next.on("notification", (msg) => cache.invalidate(msg.payload || undefined));
    next.on("error", () => {});
    next.on("end", () => {
      cache.setActive(false);
      reconnect();
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${AUTH_CHANNEL}`);
    } catch (e) {
      await next.end().catch(() => {});
      throw e;
    }
    client = next;
    delay = 250;
    // Anything that changed while nobody listened is forgotten with the old entries.
    cache.setActive(true);
  };

  const reconnect = () => {
    if (stopped) return;
    retry = setTimeout(() => connect().catch(reconnect), delay);
    delay = Math.min(delay * 2, 10_000);
  };

  await connect();
  return {
    stop: async () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
