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
import { routeRulesRouter } from "../route-rules";
import type { NodeConfig } from "./config";
import { relayRouter } from "./uploads/relay";
import { startUploadSweeper } from "./uploads/sweeper";

/** What a test may put in place of a service (loopback "internet" receivers, a test SMTP server, presigned storage). */
export interface NodeServiceOverrides {
  outbound?: Outbound;
  mailer?: Mailer;
  wakeDeliveries?: () => void;
  uploads?: UploadStorage;
}

export interface NodeServices {
  services: RequestServices;
  /** The self-hosted-only routers: route rules, and the relay route when uploads go to disk. */
  extraRouters: Array<OpenAPIHono<AppEnv>>;
  engine: DeliveryEngine;
  /** Starts the background work: the delivery engine polling the outbox, and the upload sweeper. */
  start(): void;
  /** Stops what start() started (sends in flight finish and are recorded), the mailer and the token-cache feed; the database stays open. */
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

  let sweeper: { stop(): Promise<void> } | undefined;
  return {
    services: {
      authCache,
      uploads,
      gunzip: nodeGunzip,
      db: database.db,
      keyring,
      config: { mode: "self-hosted", sharedDomain: config.sharedDomain, publicUrl: config.publicUrl },
      git: { hosts: config.gitHosts, fetch: createNodeGitFetch({ allowPrivate: config.outboundAllowPrivate }) },
      outbound,
      mailer,
      wakeDeliveries: overrides.wakeDeliveries ?? (() => engine.wake()),
    },
    extraRouters: [routeRulesRouter, ...(uploads.kind === "relay" ? [relayRouter(uploads)] : [])],
    engine,
    start() {
      engine.start();
      sweeper ??= startUploadSweeper({ db: database.db, uploads, logger });
    },
    async close() {
      await engine.stop();
      await sweeper?.stop();
      smtp?.close();
      await authFeed.stop();
    },
  };
}
