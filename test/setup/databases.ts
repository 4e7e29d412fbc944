/**
 * Global setup shared by the node and worker test projects (once per run: it is the root
 * config's globalSetup, see vitest.config.ts):
 * - a migrated template database, named to the test processes in TEST_PG_TEMPLATE_URL:
 *   freshDatabase({ migrate: true }) copies it instead of replaying every migration.
 * - two fresh Postgres databases per run (copies of the template: one for the Node projects, one
 *   for the Worker's, which runs the same suites at the same time), on TEST_DATABASE_URL's server
 *   (default: the local server, trust auth). When no Postgres answers and CI is
 *   not set, the Node+Postgres and Worker suites report themselves skipped, with a
 *   warning (a PGlite served over the wire protocol cannot stand in: it shares one
 *   session between connections, so named prepared statements collide).
 * - a migrated PGlite data dir dumped once, so each test file opens it in ~0.4 s.
 * - for the worker project, the WebSocket proxy the Neon driver connects through.
 */
import { writeFileSync, rmSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { openPglite } from "../../shared/db/pglite";
import { freshDatabase, TEMPLATE_ENV } from "../support/fresh-database";
import { databaseTarget, startWsProxy } from "../../shared/db/ws-proxy";

declare module "vitest" {
  export interface ProvidedContext {
    pgUrl: string;
    /** The Worker project's own database: the shared suites run on node-postgres and the Worker at once, and names that are global across tenants (domains, slugs) must not collide between the two. */
    pgUrlWorker: string;
    pgKind: "postgres" | "none";
    pgliteDump: string;
    wsProxyUrl: string;
  }
}

const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

export default async function setup(project: TestProject) {
  const cleanups: Array<() => Promise<void>> = [];

  const real = await reachable(ADMIN_URL);
  if (!real && process.env.CI) throw new Error(`CI requires Postgres at ${ADMIN_URL}`);
  if (!real) {
    console.warn(
      `\n!! Postgres not reachable at ${ADMIN_URL}: the Node+Postgres and Worker suites are SKIPPED. Start Postgres (see README) or set TEST_DATABASE_URL.\n`,
    );
  }
  if (real) {
    // Migrated without a template (there is none yet); no connection stays open on it, so it can be copied.
    const template = await freshDatabase(ADMIN_URL, "ws_template", { migrate: true, template: false });
    cleanups.push(async () => {
      delete process.env[TEMPLATE_ENV];
      await template.drop();
    });
    // Test processes are started after the global setup and inherit this process's environment.
    process.env[TEMPLATE_ENV] = template.url;
    const database = await freshDatabase(ADMIN_URL, "ws_test", { migrate: true });
    cleanups.push(database.drop);
    project.provide("pgUrl", database.url);
    const workerDatabase = await freshDatabase(ADMIN_URL, "ws_test_worker", { migrate: true });
    cleanups.push(workerDatabase.drop);
    project.provide("pgUrlWorker", workerDatabase.url);
  } else {
    project.provide("pgUrl", "");
    project.provide("pgUrlWorker", "");
  }
  project.provide("pgKind", real ? "postgres" : "none");

  const dir = mkdtempSync(join(tmpdir(), "ws-pglite-"));
  const seed = await openPglite({});
  const dump = await seed.client.dumpDataDir("none");
  await seed.close();
  const dumpPath = join(dir, "seed.tar");
  writeFileSync(dumpPath, Buffer.from(await dump.arrayBuffer()));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  project.provide("pgliteDump", dumpPath);

  const proxy = await startWsProxy({ target: databaseTarget(ADMIN_URL) });
  cleanups.push(proxy.close);
  project.provide("wsProxyUrl", proxy.url);

  return async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  };
}
