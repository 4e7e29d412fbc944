/**
 * Starts the self-hosted service: checks DATA_DIR and binds the port before
 * creating anything, opens the database (embedded PGlite in DATA_DIR, or Postgres
 * when DATABASE_URL is set), applies migrations, loads the keyring, bootstraps the
 * first owner on an empty database, and serves the app.
 *
 * Start-up time is the database's open (PGlite: ~0.5 s on its worker thread) and
 * loading the code (~0.4 s on the main thread): the two overlap (serving.ts).
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPglite } from "../../shared/db/pglite";
import { openPostgres } from "../../shared/db/postgres";
import { checkKeyring } from "../operations/keyring-check";
import { jsonLogger, silentLogger } from "../../shared/http/logger";
import { bootstrapOwner } from "../identity/store";
import type { NodeConfig } from "./config";
import { checkDataDir, ensurePrivateDir, loadOrCreateKeySpec, lockDataDir, makeTreePrivate, writeOwnerToken } from "./data-dir";
import { apiHostsWarning } from "./api-hosts";
import { raiseFdLimit } from "./fd-limit";
import { bindHttpServer } from "./http-server";
import { migrationsLine } from "../../shared/db/migration-level";
import { bindMetricsListener, type MetricsListener } from "../operations/metrics/listener";

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

/**
 * `startedAt` (a `performance.now()` time, default: now) is where the printed
 * "ready in" counts from; the entry point passes 0, the process's start.
 */
export async function startSelfHosted(config: NodeConfig, print: (line: string) => void = console.log, startedAt = performance.now()): Promise<RunningServer> {
  // Refusals that need nothing created come first: an unsafe DATA_DIR, then a port that is taken.
  checkDataDir(config.dataDir);
  const fdLimit = raiseFdLimit();
  if (fdLimit) print(fdLimit);
  const http = await bindHttpServer({
    port: config.port,
    host: config.host,
    maxConnectionsPerClient: config.maxConnectionsPerClient,
    trustedProxies: config.trustedProxies,
  });
  let unlock = () => {};
  let metricsListener: MetricsListener | undefined;
  try {
    // METRICS_BIND is refused as early as the main port when taken.
    if (config.metrics?.bind) metricsListener = await bindMetricsListener(config.metrics.bind);
    // Postgres may be shared by several stateless processes; the embedded database may not.
    if (!config.databaseUrl) unlock = lockDataDir(config.dataDir);
    const pgliteDir = join(config.dataDir, "pglite");
    if (!config.databaseUrl) ensurePrivateDir(pgliteDir);
    const opening = config.databaseUrl ? openPostgres(config.databaseUrl) : openPglite({ dataDir: pgliteDir, template: true });
    // The rest of the server loads while the database opens (see serving.ts): started after the open, whose worker
    // thread then starts first; awaited once the database is open. A start refused before then ignores it.
    const loading = import("./serving");
    loading.catch(() => {});
    const database = await opening;
    if (!config.databaseUrl) makeTreePrivate(pgliteDir);
    const keyring = await createKeyring(loadOrCreateKeySpec(config.dataDir, config.secretKeys));
    // Other keys than the data's (a restore elsewhere, a lost SECRET_KEYS) are refused before anything reads a secret.
    await checkKeyring(database.db, keyring).catch(async (e) => {
      await database.close();
      throw e;
    });

    // The generated token is saved before the owner is committed: a start that cannot save it creates nothing.
    let savedTo: string | undefined;
    const boot = await bootstrapOwner(database.db, {
      token: config.ownerToken,
      email: config.ownerEmail,
      beforeCommit: config.ownerToken
        ? undefined
        : (b) => {
            savedTo = writeOwnerToken(config.dataDir, b.token);
          },
    }).catch((e) => {
      if (savedTo) rmSync(savedTo, { force: true });
      throw e;
    });
    // After the owner step, like every start line: a start that fails before it prints nothing.
    print(migrationsLine(database.migrated));
    if (boot) {
      print(`First start: created the owner user ${config.ownerEmail} (WORKSPACE_OWNER_EMAIL) and organization ${boot.orgId}.`);
      if (!config.ownerToken) print(`Owner token (shown once, also saved to ${savedTo}):\n  ${boot.token}`);
    }

    const logger = config.logLevel === "silent" ? silentLogger : jsonLogger();
    const { createApp, createMetrics, createNodeServices, mountConsole, mountMetricsRoute, countRequest, startScheduledBackups } = await loading;
    const node = await createNodeServices(config, database, keyring, logger);
    // Metrics are counted whether or not they are served (functions/operations/metrics): the cost is a few counters.
    const metrics = createMetrics({ db: database.db, database, settings: config.metrics ?? {} });
    const app = createApp({
      services: () => node.services,
      logger,
      extraRouters: node.extraRouters,
      loops: node.loops,
      logRequests: config.logRequests,
      onAnswered: countRequest,
    });
    // On the main port only with METRICS_TOKEN; METRICS_BIND's listener serves them on its own.
    if (config.metrics?.token) mountMetricsRoute(app, metrics);
    metricsListener?.serve(metrics);
    // The web console at `/` (the Worker serves the same folder as static assets).
    mountConsole(app);
    // One listener: requests for the apps' hostnames go to the edge, everything else to the API.
    http.serve(app.fetch, node.edge);
    const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${http.port}`;
    const readyIn = ((performance.now() - startedAt) / 1000).toFixed(1);
    print(`workspace-service (self-hosted, ${config.databaseUrl ? "Postgres" : "embedded PGlite"}) listening on ${url} (ready in ${readyIn} s)`);
    const metricsHost = config.metrics?.bind?.host ?? "";
    if (metricsListener) print(`Metrics on http://${metricsHost.includes(":") ? `[${metricsHost}]` : metricsHost}:${metricsListener.port}/metrics`);
    const hostsWarning = apiHostsWarning(config);
    if (hostsWarning) print(hostsWarning);
    node.start();
    const backups = config.backups
      ? startScheduledBackups(
          { db: database.db, database: config.databaseUrl ? "postgres" : "pglite", uploadsDir: config.s3 ? undefined : join(config.dataDir, "uploads") },
          config.backups,
          logger,
        )
      : undefined;

    let closing: Promise<void> | undefined;
    return {
      url,
      close: () =>
        (closing ??= (async () => {
          await Promise.all([http.close(), metricsListener?.close()]);
          await backups?.stop();
          // Sends in flight finish and are recorded before the database closes.
          await node.close();
          await database.close();
          // Files the embedded database created while running are made private too.
          if (!config.databaseUrl) makeTreePrivate(pgliteDir);
          unlock();
        })()),
    };
  } catch (e) {
    await Promise.all([http.close(), metricsListener?.close()]);
    unlock();
    throw e;
  }
}
