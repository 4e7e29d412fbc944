/** Harnesses for the Node adapter's app: on embedded PGlite, and on Postgres through `pg`. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject } from "vitest";
import { AuthCache } from "../../shared/auth/auth-cache";
import { listenPglite, listenPostgres } from "../../shared/auth/auth-cache-listener";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPglite } from "../../shared/db/pglite";
import { openPostgres } from "../../shared/db/postgres";
import type { Db } from "../../shared/db/types";
import type { RequestServices } from "../../shared/http/context";
import { jsonLogger } from "../../shared/http/logger";
import { createDiskStorage } from "../../shared/storage/disk";
import { nodeGunzip } from "../../shared/storage/gunzip-node";
import { createApp } from "../../functions/app";
import { relayRouter } from "../../functions/self-hosted/uploads/relay";
import { sweepUploadsOnce } from "../../functions/self-hosted/uploads/sweeper";
import { buildRequest, PostgresUnavailable, type Harness, type HarnessFactory } from "./harness";
import { TEST_SECRET_KEYS } from "./test-keys";

/** Services a suite may inject (the notifications suites: outbound HTTP to loopback receivers, e-mail; folder uploads: presigned storage). */
export type HarnessServices = Pick<RequestServices, "outbound" | "mailer" | "wakeDeliveries" | "uploads">;

async function nodeHarness(
  runtime: Harness["runtime"],
  db: Db,
  close: () => Promise<void>,
  realConcurrency: boolean,
  extras: HarnessServices & Pick<RequestServices, "authCache"> = {},
): Promise<Harness> {
  const keyring = await createKeyring(TEST_SECRET_KEYS);
  const logs: string[] = [];
  const logger = jsonLogger((line) => logs.push(line));
  // Like the adapter: folder uploads relayed to a data directory of its own, unless presigned storage is injected.
  const uploadDir = mkdtempSync(join(tmpdir(), "ws-uploads-"));
  const uploads = extras.uploads ?? createDiskStorage({ dir: uploadDir });
  const app = createApp({
    services: () => ({ db, keyring, config: { mode: "self-hosted", sharedDomain: "apps.test" }, ...extras, uploads, gunzip: nodeGunzip }),
    logger,
    extraRouters: uploads.kind === "relay" ? [relayRouter(uploads)] : [],
  });
  const harness = {
    runtime,
    realConcurrency,
    db,
    keyring,
    logs,
    request: async (path, init) => app.fetch(buildRequest(path, init)),
    /** The app as a fetch function (for clients that build their own requests). */
    fetch: async (request: Request) => app.fetch(request),
    /** The upload store behind the sessions (to check what is kept and removed). */
    uploadStore: uploads,
    /** The adapter's upload sweep, once. */
    sweepUploads: (now = new Date()) => sweepUploadsOnce(db, uploads, now, logger),
    close: async () => {
      await close();
      rmSync(uploadDir, { recursive: true, force: true });
    },
  } satisfies Harness & Record<string, unknown>;
  return harness;
}

// Like the real adapter, the harnesses cache token lookups, fed by the database's change notifications.
async function openPgliteHarness(extras?: HarnessServices): Promise<Harness> {
  const dump = new Blob([readFileSync(inject("pgliteDump"))]);
  const database = await openPglite({ loadDataDir: dump, migrate: false });
  const authCache = new AuthCache();
  const feed = await listenPglite(database.client, authCache);
  const close = async () => {
    await feed.stop();
    await database.close();
  };
  return nodeHarness("node-pglite", database.db, close, false, { ...extras, authCache });
}

async function openPostgresHarness(extras?: HarnessServices): Promise<Harness> {
  if (inject("pgKind") !== "postgres") throw new PostgresUnavailable();
  const database = await openPostgres(inject("pgUrl"), { migrate: false, max: 20 });
  const authCache = new AuthCache();
  const feed = await listenPostgres(inject("pgUrl"), authCache);
  const close = async () => {
    await feed.stop();
    await database.close();
  };
  return nodeHarness("node-postgres", database.db, close, inject("pgKind") === "postgres", { ...extras, authCache });
}

export const pgliteHarness: HarnessFactory = Object.assign(() => openPgliteHarness(), { realConcurrency: () => false });

export const postgresHarness: HarnessFactory = Object.assign(() => openPostgresHarness(), { realConcurrency: () => inject("pgKind") === "postgres" });

/** The same harnesses with injected services. */
export const pgliteHarnessWith = (extras: HarnessServices): HarnessFactory => Object.assign(() => openPgliteHarness(extras), { realConcurrency: () => false });
export const postgresHarnessWith = (extras: HarnessServices): HarnessFactory =>
  Object.assign(() => openPostgresHarness(extras), { realConcurrency: () => inject("pgKind") === "postgres" });
