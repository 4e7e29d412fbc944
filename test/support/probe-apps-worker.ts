/**
 * The readiness suite's apps on the Worker: the real Worker entry with its
 * DATABASE_URL pointed at a database built to fail a check, reached through the
 * run's WebSocket proxy like every Worker test's database.
 */
import { Pool } from "@neondatabase/serverless";
import { inject } from "vitest";
import { useLocalWsProxy } from "../../shared/db/neon";
import type { ProbeApp, ProbeDatabase } from "./probe-apps";
import { openWorkerHarness } from "./worker-harness";

async function onServer(sqlText: string): Promise<void> {
  const pool = new Pool({ connectionString: inject("pgUrlWorker") });
  pool.on("error", () => {});
  try {
    await pool.query(sqlText);
  } finally {
    await pool.end();
  }
}

export async function openProbeApp(database: ProbeDatabase): Promise<ProbeApp> {
  useLocalWsProxy(inject("wsProxyUrl"));
  const url = new URL(inject("pgUrlWorker"));
  if (database === "unreachable") {
    url.pathname = "/no_such_database_for_readyz";
    return openWorkerHarness(undefined, { DATABASE_URL: url.toString() });
  }
  const name = `ws_readyz_worker_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
  await onServer(`create database ${name}`);
  url.pathname = `/${name}`;
  const pool = new Pool({ connectionString: url.toString() });
  pool.on("error", () => {});
  try {
    await pool.query(
      `create schema drizzle; create table drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint);${database.recorded
        .map((m) => `insert into drizzle.__drizzle_migrations (hash, created_at) values ('${m.tag}', ${m.when});`)
        .join("")}`,
    );
  } finally {
    await pool.end();
  }
  const h = await openWorkerHarness(undefined, { DATABASE_URL: url.toString() });
  return {
    request: h.request,
    close: async () => {
      await h.close();
      await onServer(`drop database if exists ${name} with (force)`);
    },
  };
}
