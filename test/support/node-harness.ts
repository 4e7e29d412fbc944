/** Harnesses for the Node adapter's app: on embedded PGlite, and on Postgres through `pg`. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject } from "vitest";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { jsonLogger } from "../../shared/http/logger";
import { createApp } from "../../functions/app";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { createNodeServices, type NodeServiceOverrides } from "../../functions/self-hosted/services";
import { sweepUploadsOnce } from "../../functions/self-hosted/uploads/sweeper";
import { buildRequest, PostgresUnavailable, type Harness, type HarnessFactory } from "./harness";
import { TEST_SECRET_KEYS } from "./test-keys";

/** Services a suite may inject (the notifications suites: outbound HTTP to loopback receivers, e-mail; folder uploads: presigned storage). */
export type HarnessServices = NodeServiceOverrides;

/** Extra configuration an operator would set (e.g. LOCAL_ROOTS), added to the harness's own; none by default. */
export type HarnessEnv = Record<string, string>;

/**
 * The app over `database` with the services `npm start` builds (createNodeServices), from
 * the configuration an operator would give: the suites' receivers listen on loopback
 * (OUTBOUND_ALLOW_PRIVATE), uploads are relayed to a data directory of the harness's own.
 *
 * The background work (delivery engine polling, upload sweeper) runs as in production on
 * PGlite, whose database is the harness's own; not on Postgres, whose database every test
 * file shares (an engine there would take other files' sends), nor when a suite injects
 * wakeDeliveries (it drives delivery itself).
 */
async function nodeHarness(
  runtime: Harness["runtime"],
  database: PgliteDatabase | PostgresDatabase,
  databaseUrl: string | undefined,
  realConcurrency: boolean,
  overrides: HarnessServices = {},
  env: HarnessEnv = {},
): Promise<Harness> {
  const keyring = await createKeyring(TEST_SECRET_KEYS);
  const logs: string[] = [];
  const logger = jsonLogger((line) => logs.push(line));
  const dataDir = mkdtempSync(join(tmpdir(), "ws-harness-"));
  const config = loadNodeConfig({
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    SECRET_KEYS: TEST_SECRET_KEYS,
    SHARED_DOMAIN: "apps.test",
    OUTBOUND_ALLOW_PRIVATE: "true",
    // The suites play the runner's steps themselves; a suite that wants the real one passes `runner` in its overrides.
    RUNNER: "off",
    // Gitea points at the run's loopback git host (test/setup/git.ts); the other providers keep their public hosts.
    GIT_GITEA_URL: inject("gitServerUrl"),
    ...env,
  });
  const node = await createNodeServices(config, database, keyring, logger, overrides);
  if (runtime === "node-pglite" && !overrides.wakeDeliveries) node.start();
  const app = createApp({ services: () => node.services, logger, extraRouters: node.extraRouters, loops: node.loops });
  const uploads = node.services.uploads!;
  const harness = {
    runtime,
    realConcurrency,
    db: database.db,
    keyring,
    logs,
    request: async (path, init) => app.fetch(buildRequest(path, init)),
    /** The app as a fetch function (for clients that build their own requests). */
    fetch: async (request: Request) => app.fetch(request),
    /** The upload store behind the sessions (to check what is kept and removed). */
    uploadStore: uploads,
    /** The adapter's upload sweep, once. */
    sweepUploads: (now = new Date()) => sweepUploadsOnce(database.db, uploads, now, logger),
    close: async () => {
      await node.close();
      await database.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  } satisfies Harness & Record<string, unknown>;
  return harness;
}

export async function openPgliteHarness(overrides?: HarnessServices, env?: HarnessEnv): Promise<Harness> {
  const dump = new Blob([readFileSync(inject("pgliteDump"))]);
  const database = await openPglite({ loadDataDir: dump, migrate: false });
  return nodeHarness("node-pglite", database, undefined, false, overrides, env);
}

export async function openPostgresHarness(overrides?: HarnessServices, env?: HarnessEnv): Promise<Harness> {
  if (inject("pgKind") !== "postgres") throw new PostgresUnavailable();
  const database = await openPostgres(inject("pgUrl"), { migrate: false, max: 20 });
  return nodeHarness("node-postgres", database, inject("pgUrl"), inject("pgKind") === "postgres", overrides, env);
}

export const pgliteHarness: HarnessFactory = Object.assign(() => openPgliteHarness(), { realConcurrency: () => false });

export const postgresHarness: HarnessFactory = Object.assign(() => openPostgresHarness(), { realConcurrency: () => inject("pgKind") === "postgres" });
