/**
 * Feeds the auth cache from the database's `workspace_auth` notifications (Node
 * adapter only): each names a user whose cached lookups are evicted. While the
 * Postgres listener is down the cache is bypassed, and everything cached before
 * is forgotten when it is back.
 */
import type { PGlite } from "@electric-sql/pglite";
import { listenPgliteChannel, listenPostgresChannel, type Stoppable } from "../db/listen";
import { AUTH_CHANNEL, type AuthCache } from "./auth-cache";

export type { Stoppable };

const handlersFor = (cache: AuthCache) => ({
  onMessage: (userId: string) => cache.invalidate(userId || undefined),
  onActive: (active: boolean) => cache.setActive(active),
});

export async function listenPglite(client: PGlite, cache: AuthCache): Promise<Stoppable> {
  return listenPgliteChannel(client, AUTH_CHANNEL, { onMessage: handlersFor(cache).onMessage });
}

export async function listenPostgres(url: string, cache: AuthCache): Promise<Stoppable> {
  return listenPostgresChannel(url, AUTH_CHANNEL, handlersFor(cache));
}
