/**
 * The services of the self-hosted adapter, built in one place for `npm start`
 * and for the Node test harness, so the suites run what production runs: the
 * SSRF-guarded outbound client, the mailer, the delivery engine woken by new
 * sends, the token cache fed by the database's change notifications, and folder
 * uploads (presigned to S3, or relayed to DATA_DIR/uploads with the relay route).
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import { join } from "node:path";
import { AuthCache } from "../../shared/auth/auth-cache";
import { listenPglite, listenPostgres } from "../../shared/auth/auth-cache-listener";
import type { Keyring } from "../../shared/crypto/keyring";
import { createNodeGitFetch } from "../../shared/git/node-fetch";
import type { PgliteDatabase } from "../../shared/db/pglite";
import type { PostgresDatabase } from "../../shared/db/postgres";
import type { AppEnv, RequestServices } from "../../shared/http/context";
import type { Logger } from "../../shared/http/logger";
import { createEmailApiMailer } from "../../shared/outbound/email-api";
import { createNodeOutbound } from "../../shared/outbound/node";
import { createSmtpMailer } from "../../shared/outbound/smtp";
import type { Mailer, Outbound } from "../../shared/outbound/types";
import { createDiskStorage } from "../../shared/storage/disk";
import { nodeGunzip } from "../../shared/storage/gunzip-node";
import { createS3Storage } from "../../shared/storage/s3";
import type { UploadStorage } from "../../shared/storage/types";
import { createDeliveryEngine, type DeliveryEngine } from "../notifications/delivery/engine";
import { selfHostedAuthRouter } from "../auth";
import { routeRulesRouter } from "../route-rules";
import { createLocalFolders, localFoldersRouter } from "../local-folders";
import { cloudRouter, createCloudService, linkFromEnvironment } from "../cloud";
import { useGuardedCloudTransport } from "../cloud/transport";
import { createLogFeed } from "../../shared/logs/feed";
import { createWakeFeed, JOBS_QUEUED } from "../../shared/wake-feed";
import { startRetentionSweeper } from "../operations/retention/sweeper";
import { createLogWriter, createRequestLogWriter } from "../logs/writer";
import { listenPgliteChannel, listenPostgresChannel } from "../../shared/db/listen";
import { createEdge, type Edge } from "./edge/edge";
import { createRouteTable, EDGE_CHANNEL } from "./edge/route-table";
import type { NodeConfig, RunnerSettings } from "./config";
import type { Runner } from "./runner/runner";
import { createRunnerCore } from "./runner/core";
import { createDbControl } from "./runner/db-control";
import { withTerminalLines } from "./runner/terminal-lines";
import { apiHostnames } from "./api-hosts";
import { relayRouter } from "./uploads/relay";
import type { LoopProbe } from "../operations/readiness";
import { startUploadSweeper } from "./uploads/sweeper";

/** What a test may put in place of a service (loopback "internet" receivers, a test SMTP server, presigned storage). */
export interface NodeServiceOverrides {
  outbound?: Outbound;
  mailer?: Mailer;
  wakeDeliveries?: () => void;
  uploads?: UploadStorage;
  /** Runner settings over the configuration's (the test harness turns the runner off; runner suites shorten its timeouts). */
  runner?: Partial<RunnerSettings>;
  /** Called as each transfer step starts (the transfer suites stop the cloud between steps). */
  beforeTransferStep?: (direction: "to-cloud" | "to-self-hosted", step: string) => Promise<void>;
}

export interface NodeServices {
  services: RequestServices;
  /** The self-hosted-only routers: route rules, and the relay route when uploads go to disk. */
  extraRouters: Array<OpenAPIHono<AppEnv>>;
  engine: DeliveryEngine;
  /** The edge in front of the deployed apps (handed to the HTTP listener by start.ts). */
  edge: Edge;
  /** The deployment runner (RUNNER=on), started by start(). */
  runner?: Runner;
  /** What GET /readyz checks besides the database: the edge's route-table feed, and the runner's loop when it runs. */
  loops: LoopProbe[];
  /** Starts the background work: the delivery engine polling the outbox, the upload and log sweepers, and the runner (restoring current apps). */
  start(): void;
  /** Stops what start() started (the runner first: builds in flight go back to the queue, apps stop; sends in flight finish and are recorded), the mailer and the token-cache feed; the database stays open. */
  close(): Promise<void>;
}

export async function createNodeServices(
  config: NodeConfig,
  database: PgliteDatabase | PostgresDatabase,
  keyring: Keyring,
  logger: Logger,
  overrides: NodeServiceOverrides = {},
): Promise<NodeServices> {
  const outbound = overrides.outbound ?? createNodeOutbound({ allowPrivate: config.outboundAllowPrivate });
  // The cloud link's URL and the storage URLs a transfer is given are reached through the outbound guard too.
  useGuardedCloudTransport({ allowPrivate: config.outboundAllowPrivate, trustedOrigin: config.cloud.apiUrl ? new URL(config.cloud.apiUrl).origin : undefined });
  const smtp = overrides.mailer || !config.smtpUrl ? undefined : createSmtpMailer({ url: config.smtpUrl, from: config.emailFrom });
  const mailer: Mailer | undefined =
    overrides.mailer ??
    smtp ??
    (config.emailApiKey ? createEmailApiMailer({ apiKey: config.emailApiKey, url: config.emailApiUrl, from: config.emailFrom }) : undefined);
  const engine = createDeliveryEngine({ db: database.db, keyring, transports: { outbound, mailer }, logger });

  // Token lookups are cached, evicted by the database's change notifications.
  const authCache = new AuthCache();
  const authFeed = "client" in database ? await listenPglite(database.client, authCache) : await listenPostgres(config.databaseUrl!, authCache);

  const uploads =
    overrides.uploads ?? (config.s3 ? createS3Storage(config.s3) : createDiskStorage({ dir: join(config.dataDir, "uploads"), publicUrl: config.publicUrl }));

  // Log lines (build and runtime) go through one batching writer; stored lines wake the log streams.
  const logFeed = createLogFeed();
  // Build servers' waiting claims wake when this process queues a deployment (functions/servers/runner-jobs.ts).
  const jobFeed = createWakeFeed();
  const writer = createLogWriter({ db: database.db, logger, onAppended: (ids) => logFeed.notify(ids) });
  // The edge's request lines: a batch row per project and flush (functions/logs/request-batches.ts).
  const requestWriter = createRequestLogWriter({ db: database.db, logger, onAppended: (ids) => logFeed.notify(ids) });
  const wakeDeliveries = overrides.wakeDeliveries ?? (() => engine.wake());

  const runnerSettings = { ...config.runner, ...overrides.runner };
  // The in-process runner reaches the control plane through the database (one runner core; `wsp runner`'s transport is HTTP).
  const core = runnerSettings.enabled
    ? await createRunnerCore({
        settings: runnerSettings,
        gitHosts: config.gitHosts,
        dataDir: config.dataDir,
        logger,
        allowPrivate: config.outboundAllowPrivate,
        // A line on the terminal per deployment state change, crash, sleep and wake (LOG_LEVEL=silent: none).
        control: () =>
          withTerminalLines(
            createDbControl({
              db: database.db,
              keyring,
              uploads,
              writer,
              logger,
              runnerId: runnerSettings.id,
              wakeDeliveries,
              wakeStreams: (id) => logFeed.notify([id]),
            }),
            logger,
          ),
      })
    : undefined;
  const { runner, sandbox, control } = core ?? {};

  // Before the edge loads its routes: the apps of this runner's previous run are gone, their ports may be another process's now.
  await control?.forgetPorts();
  // The edge's route table, reloaded per project on the database's workspace_edge notifications.
  const routeTable = await createRouteTable({ db: database.db, sharedDomain: config.sharedDomain, logger });
  // A project's routes changed: the table reloads it, and the runner reconciles (a promote, a wake, a sleep mode change made through any process).
  const routeChanged = (projectId: string) => {
    routeTable.changed(projectId);
    runner?.wake();
  };
  const routeFeed =
    "client" in database
      ? await listenPgliteChannel(database.client, EDGE_CHANNEL, { onMessage: routeChanged })
      : await listenPostgresChannel(config.databaseUrl!, EDGE_CHANNEL, { onMessage: routeChanged, onActive: routeTable.setActive });
  const edge = createEdge({
    db: database.db,
    // Decrypts build servers' edge keys: requests for apps on a server are forwarded there, signed.
    keyring,
    // Forwarding to a server's public URL passes the outbound guard (functions/servers/forward-lookup-node.ts).
    outboundAllowPrivate: config.outboundAllowPrivate,
    table: routeTable,
    logs: requestWriter,
    logger,
    trustedProxies: config.trustedProxies,
    holdMs: runnerSettings.healthTimeoutMs,
    // Idleness is measured in SLEEP_AFTER; a quarter of it (at most 10 s) is precise enough and keeps writes rare.
    touchEveryMs: Math.min(10_000, runnerSettings.sleepAfterMs / 4),
    onWake: () => runner?.wake(),
    // The API's own names are never an app's, even if a project or domain claims one; any other Host is an app's or the edge's 404.
    apiHosts: apiHostnames(config),
  });

  let sweeper: { stop(): Promise<void> } | undefined;
  let retentionSweeper: { stop(): Promise<void> } | undefined;
  let envLink: { stop(): void } | undefined;
  return {
    services: {
      authCache,
      uploads,
      gunzip: nodeGunzip,
      db: database.db,
      keyring,
      config: {
        mode: "self-hosted",
        // Placement's `auto` builds here when this instance runs a runner (functions/deployments/placement.ts).
        localRunner: runner !== undefined,
        sharedDomain: config.sharedDomain,
        publicUrl: config.publicUrl,
        apiHosts: config.apiHosts,
        cloudApiUrl: config.cloud.apiUrl,
        trustedProxies: config.trustedProxies,
        storageQuotas: config.storageQuotas,
        outboundAllowPrivate: config.outboundAllowPrivate,
      },
      git: { hosts: config.gitHosts, fetch: createNodeGitFetch({ allowPrivate: config.outboundAllowPrivate }) },
      outbound,
      mailer,
      wakeDeliveries,
      wakeRunner: () => {
        runner?.wake();
        jobFeed.notify([JOBS_QUEUED]);
      },
      jobFeed,
      logFeed,
      localFolders: createLocalFolders({ roots: config.localRoots, uploads }),
      cloud: createCloudService({ db: database.db, keyring, beforeTransferStep: overrides.beforeTransferStep }),
      edgeRoutes: {
        async serves(projectId, hostname) {
          await routeTable.reload(projectId);
          const target = routeTable.lookup(hostname);
          return target?.projectId === projectId && !target.disabled && !config.apiHosts.includes(hostname);
        },
      },
    },
    extraRouters: [selfHostedAuthRouter, routeRulesRouter, localFoldersRouter, cloudRouter, ...(uploads.kind === "relay" ? [relayRouter(uploads)] : [])],
    engine,
    edge,
    runner,
    loops: [
      // Fed by notifications; when the feed is down it reloads every second: 30 s without a reload is a table gone stale.
      { name: "edge", lastTickAt: () => routeTable.lastTickAt(), stalledAfterMs: 30_000 },
      // The poll runs every 2 s; a claim or reconcile stuck for 30 s is a runner that builds and restores nothing.
      ...(runner ? [{ name: "runner", lastTickAt: () => runner.lastTickAt(), stalledAfterMs: 30_000 }] : []),
    ],
    start() {
      engine.start();
      sweeper ??= startUploadSweeper({ db: database.db, uploads, logger });
      retentionSweeper ??= startRetentionSweeper({ db: database.db, logger, settings: config.retention });
      runner?.start();
      envLink ??= linkFromEnvironment(database.db, keyring, config.cloud, logger);
    },
    async close() {
      envLink?.stop();
      await runner?.stop();
      await sandbox?.close();
      await writer.flush();
      await requestWriter.flush();
      await engine.stop();
      await sweeper?.stop();
      await retentionSweeper?.stop();
      smtp?.close();
      await authFeed.stop();
      edge.stop();
      await routeFeed.stop();
      routeTable.stop();
    },
  };
}
