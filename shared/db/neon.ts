/**
 * Postgres through the Neon serverless driver (WebSocket Pool): the cloud Worker.
 * A Pool lives for one request; the caller ends it with `waitUntil(close())`.
 */
import { neonConfig, Pool } from "@neondatabase/serverless";
import { drizzle } from "drizzle-orm/neon-serverless";
import * as schema from "./schema";
import type { Db } from "./types";

/**
 * Points the driver at a local WebSocket-to-TCP proxy (development and tests).
 * `proxyUrl` is e.g. `ws://127.0.0.1:9000/v1`. Left unset in production (Neon's own proxy).
 */
export function useLocalWsProxy(proxyUrl: string): void {
  neonConfig.wsProxy = (host, port) => `${proxyUrl.replace(/^wss?:\/\//, "")}?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = proxyUrl.startsWith("wss://");
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
}

export function openNeon(url: string): { db: Db; close(): Promise<void> } {
  const pool = new Pool({ connectionString: url });
  // Without a listener, a socket closed by the server fails the whole isolate.
  pool.on("error", () => {});
  const db = drizzle(pool, { schema }) as unknown as Db;
  return { db, close: () => pool.end() };
}
