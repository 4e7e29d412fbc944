/**
 * The benchmark's server process, started by bench/settings.ts over an IPC
 * channel (`node --import tsx bench/server.ts`), so the load generator never
 * shares this event loop. It serves two apps on two ephemeral ports of 127.0.0.1,
 * each with its own pg Pool of the same size:
 *   - real: createApp(...) as the self-hosted adapter builds it (its services, the request
 *     metrics counted, no request lines), served by @hono/node-server's listener directly
 *     on a server of the self-hosted listener's response class (RequestIdResponse)
 *     (`npm start` puts the edge's Host check in front of it: bench:edge measures that path);
 *   - bare: a plain Hono app whose GET /bare runs the same settings select.
 *
 * Environment (set by the parent): BENCH_DB_URL, BENCH_ORG_ID, BENCH_USER_ID,
 * BENCH_POOL_MAX.
 *
 * IPC: sends {type:"ready", realPort, barePort}; answers {type:"reset"} and
 * {type:"stats"} with per-app query counts, time spent waiting on pool.query,
 * and the process's CPU time (and its user part) and event-loop utilization since the last reset.
 * {type:"profile-start"} / {type:"profile-stop"} profile this process in between and
 * answer {type:"profile", frames}: every frame by self time (bench/profile-frames.ts).
 * Exits on SIGTERM/SIGINT or when the parent goes away (which also lets
 * `--cpu-prof` write its profile).
 */
import { serve, type ServerType } from "@hono/node-server";
import { and, eq, sql } from "drizzle-orm";
import { Hono } from "hono";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import type pg from "pg";
import { createApp } from "../functions/app";
import { RequestIdResponse } from "../functions/self-hosted/request-id-response";
import { countRequest } from "../functions/operations/metrics/http-requests";
import { AuthCache } from "../shared/auth/auth-cache";
import { listenPostgres } from "../shared/auth/auth-cache-listener";
import { createKeyring, generateKeySpec } from "../shared/crypto/keyring";
import { openPostgres, type PostgresDatabase } from "../shared/db/postgres";
import { workspaceSettings } from "../shared/db/schema";
import type { RequestServices } from "../shared/http/context";
import { silentLogger } from "../shared/http/logger";
import { type Frame, startProfile } from "./profile-frames";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`bench/server.ts: ${name} is not set`);
  return value;
}

interface QueryStats {
  queries: number;
  /** Milliseconds from pool.query() to its settlement, summed (overlapping queries add up). */
  queryMs: number;
}

/** Counts the queries drizzle sends through the pool (drizzle's node-postgres driver calls pool.query). */
function instrument(pool: pg.Pool): QueryStats {
  const stats: QueryStats = { queries: 0, queryMs: 0 };
  const original = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    stats.queries++;
    const started = performance.now();
    const result = original(...args);
    if (result && typeof (result as Promise<unknown>).then === "function") {
      (result as Promise<unknown>).then(
        () => (stats.queryMs += performance.now() - started),
        () => (stats.queryMs += performance.now() - started),
      );
    }
    return result;
  };
  return stats;
}

function listen(fetch: (req: Request) => Response | Promise<Response>): Promise<ServerType> {
  // The self-hosted listener's response class (functions/self-hosted/http-server.ts), for both apps.
  const server = serve({ fetch, port: 0, hostname: "127.0.0.1", serverOptions: { ServerResponse: RequestIdResponse } });
  return new Promise((resolve, reject) => {
    server.once("listening", () => resolve(server));
    server.once("error", reject);
  });
}

const port = (s: ServerType) => (s.address() as AddressInfo).port;

async function main() {
  if (!process.send) throw new Error("bench/server.ts must be started by bench/settings.ts (it needs an IPC channel)");
  const url = env("BENCH_DB_URL");
  const owner = { orgId: env("BENCH_ORG_ID"), userId: env("BENCH_USER_ID") };
  const max = Number(process.env.BENCH_POOL_MAX ?? 10);

  const databases: PostgresDatabase[] = [];
  const servers: ServerType[] = [];
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    const hardStop = setTimeout(() => process.exit(code), 5000);
    hardStop.unref();
    await Promise.allSettled(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    await Promise.allSettled(databases.map((d) => d.close()));
    process.exit(code);
  };
  process.on("SIGTERM", () => void stop(0));
  process.on("SIGINT", () => void stop(0));
  process.on("disconnect", () => void stop(0));

  // (a) the real app, as functions/self-hosted/start.ts builds it.
  const realDb = await openPostgres(url, { migrate: false, max });
  databases.push(realDb);
  const realStats = instrument(realDb.pool);
  const keyring = await createKeyring(generateKeySpec("b1"));
  // As functions/self-hosted/start.ts builds it (sharedDomain: SHARED_DOMAIN's default; a
  // variable, not a literal, so this compiles whether or not ServiceConfig has that field yet).
  const config = { mode: "self-hosted" as const, sharedDomain: process.env.SHARED_DOMAIN || "localhost" };
  // As the self-hosted adapter runs it: token lookups cached, fed by LISTEN.
  const authCache = new AuthCache();
  const feed = await listenPostgres(url, authCache);
  databases.push({ close: () => feed.stop() } as PostgresDatabase);
  const services: RequestServices = { db: realDb.db, keyring, config, authCache };
  // As `npm start` runs it by default: LOG_REQUESTS unset (no line per request), the request metrics counted.
  const app = createApp({ services: () => services, logger: silentLogger, logRequests: false, onAnswered: countRequest });

  // (b) a bare Hono app: the same settings select through the same data layer
  // (drizzle, a named prepared statement, a pool of the same size), with no
  // authentication, validation, logging or error handling around it. BENCH_BARE=pg
  // swaps in raw node-postgres instead, the floor of what one query can cost.
  const bareDb = await openPostgres(url, { migrate: false, max });
  databases.push(bareDb);
  const bareStats = instrument(bareDb.pool);
  const bare = new Hono();
  const statement = bareDb.db
    .select()
    .from(workspaceSettings)
    .where(and(eq(workspaceSettings.orgId, sql.placeholder("orgId")), eq(workspaceSettings.userId, sql.placeholder("userId"))))
    .prepare("bare_settings");
  const rawPg = process.env.BENCH_BARE === "pg";
  bare.get("/bare", async (c) => {
    if (rawPg) {
      const { rows } = await bareDb.pool.query({
        name: "bare_settings_pg",
        text: "select * from workspace_settings where org_id = $1 and user_id = $2",
        values: [owner.orgId, owner.userId],
      });
      return c.json(rows[0] ? { orgId: rows[0].org_id, buildMode: rows[0].build_mode } : null);
    }
    const [row] = await statement.execute({ orgId: owner.orgId, userId: owner.userId });
    return c.json(row ?? null);
  });

  servers.push(await listen(app.fetch), await listen(bare.fetch));

  let since = { cpu: process.cpuUsage(), elu: performance.eventLoopUtilization(), at: performance.now() };
  const reset = () => {
    for (const s of [realStats, bareStats]) {
      s.queries = 0;
      s.queryMs = 0;
    }
    since = { cpu: process.cpuUsage(), elu: performance.eventLoopUtilization(), at: performance.now() };
  };

  let stopProfile: ((count: number) => Promise<Frame[]>) | undefined;
  process.on("message", (msg: { type?: string }) => {
    if (msg?.type === "profile-start") {
      void startProfile().then((stop) => {
        stopProfile = stop;
        process.send!({ type: "profile-started" });
      });
    } else if (msg?.type === "profile-stop") {
      void stopProfile?.(Number.POSITIVE_INFINITY).then((frames) => process.send!({ type: "profile", frames }));
    } else if (msg?.type === "reset") {
      reset();
      process.send!({ type: "reset-done" });
    } else if (msg?.type === "stats") {
      const cpu = process.cpuUsage(since.cpu);
      process.send!({
        type: "stats",
        real: { ...realStats },
        bare: { ...bareStats },
        wallMs: performance.now() - since.at,
        cpuMs: (cpu.user + cpu.system) / 1000,
        userMs: cpu.user / 1000,
        eventLoopUtilization: performance.eventLoopUtilization(since.elu).utilization,
      });
    }
  });

  process.send({ type: "ready", realPort: port(servers[0]!), barePort: port(servers[1]!) });
}

main().catch((e) => {
  console.error("bench/server.ts:", e instanceof Error ? (e.stack ?? e.message) : e);
  process.exit(1);
});
