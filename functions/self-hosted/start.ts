/**
 * Starts the self-hosted service: checks DATA_DIR and binds the port before
 * creating anything, opens the database (embedded PGlite in DATA_DIR, or Postgres
 * when DATABASE_URL is set), applies migrations, loads the keyring, bootstraps the
 * first owner on an empty database, and serves the app.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { AuthCache } from "../../shared/auth/auth-cache";
import { listenPglite, listenPostgres } from "../../shared/auth/auth-cache-listener";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPglite } from "../../shared/db/pglite";
import { openPostgres } from "../../shared/db/postgres";
import type { RequestServices } from "../../shared/http/context";
import { jsonLogger, silentLogger } from "../../shared/http/logger";
import { createEmailApiMailer } from "../../shared/outbound/email-api";
import { createNodeOutbound } from "../../shared/outbound/node";
import { createSmtpMailer } from "../../shared/outbound/smtp";
import type { Mailer } from "../../shared/outbound/types";
import { createDiskStorage } from "../../shared/storage/disk";
import { nodeGunzip } from "../../shared/storage/gunzip-node";
import { createS3Storage } from "../../shared/storage/s3";
import { createApp } from "../app";
import { bootstrapOwner } from "../identity/store";
import { createDeliveryEngine } from "../notifications/delivery/engine";
import type { NodeConfig } from "./config";
import { checkDataDir, ensurePrivateDir, loadOrCreateKeySpec, lockDataDir, makeTreePrivate, writeOwnerToken } from "./data-dir";
import { bindHttpServer } from "./http-server";
import { relayRouter } from "./uploads/relay";
import { startUploadSweeper } from "./uploads/sweeper";

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

export async function startSelfHosted(config: NodeConfig, print: (line: string) => void = console.log): Promise<RunningServer> {
  // Refusals that need nothing created come first: an unsafe DATA_DIR, then a port that is taken.
  checkDataDir(config.dataDir);
  const http = await bindHttpServer({ port: config.port, host: config.host });
  let unlock = () => {};
  try {
    // Postgres may be shared by several stateless processes; the embedded database may not.
    if (!config.databaseUrl) unlock = lockDataDir(config.dataDir);
    const pgliteDir = join(config.dataDir, "pglite");
    if (!config.databaseUrl) ensurePrivateDir(pgliteDir);
    const database = config.databaseUrl ? await openPostgres(config.databaseUrl) : await openPglite({ dataDir: pgliteDir });
    if (!config.databaseUrl) makeTreePrivate(pgliteDir);
    const keyring = await createKeyring(loadOrCreateKeySpec(config.dataDir, config.secretKeys));

    // The generated token is saved before the owner is committed: a start that cannot save it creates nothing.
    let savedTo: string | undefined;
    const boot = await bootstrapOwner(database.db, {
      token: config.ownerToken,
      beforeCommit: config.ownerToken ? undefined : (b) => void (savedTo = writeOwnerToken(config.dataDir, b.token)),
    }).catch((e) => {
      if (savedTo) rmSync(savedTo, { force: true });
      throw e;
    });
    if (boot) {
      print(`First start: created the owner user and organization ${boot.orgId}.`);
      if (!config.ownerToken) print(`Owner token (shown once, also saved to ${savedTo}):\n  ${boot.token}`);
    }

    const logger = config.logLevel === "silent" ? silentLogger : jsonLogger();
    // Notifications: SSRF-guarded outbound HTTP, e-mail, and the in-process delivery engine polling the outbox.
    const outbound = createNodeOutbound({ allowPrivate: config.outboundAllowPrivate });
    const smtp = config.smtpUrl ? createSmtpMailer({ url: config.smtpUrl, from: config.emailFrom }) : undefined;
    const mailer: Mailer | undefined =
      smtp ?? (config.emailApiKey ? createEmailApiMailer({ apiKey: config.emailApiKey, url: config.emailApiUrl, from: config.emailFrom }) : undefined);
    const engine = createDeliveryEngine({ db: database.db, keyring, transports: { outbound, mailer }, logger });

    // Token lookups are cached, evicted by the database's change notifications.
    const authCache = new AuthCache();
    const authFeed = "client" in database ? await listenPglite(database.client, authCache) : await listenPostgres(config.databaseUrl!, authCache);

    // Folder uploads: presigned to S3 when configured, else relayed to DATA_DIR/uploads (the relay route exists only then).
    const uploads = config.s3 ? createS3Storage(config.s3) : createDiskStorage({ dir: join(config.dataDir, "uploads"), publicUrl: config.publicUrl });

    const services: RequestServices = {
      authCache,
      uploads,
      gunzip: nodeGunzip,
      db: database.db,
      keyring,
      config: { mode: "self-hosted", sharedDomain: config.sharedDomain },
      outbound,
      mailer,
      wakeDeliveries: () => engine.wake(),
    };
    const app = createApp({ services: () => services, logger, extraRouters: uploads.kind === "relay" ? [relayRouter(uploads)] : [] });
    http.serve(app.fetch);
    const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${http.port}`;
    print(`workspace-service (self-hosted, ${config.databaseUrl ? "Postgres" : "embedded PGlite"}) listening on ${url}`);
    engine.start();
    const sweeper = startUploadSweeper({ db: database.db, uploads, logger });

    let closing: Promise<void> | undefined;
    return {
      url,
      close: () =>
        (closing ??= (async () => {
          await http.close();
          // Sends in flight finish and are recorded before the database closes.
          await engine.stop();
          await sweeper.stop();
          smtp?.close();
          await authFeed.stop();
          await database.close();
          // Files the embedded database created while running are made private too.
          if (!config.databaseUrl) makeTreePrivate(pgliteDir);
          unlock();
        })()),
    };
  } catch (e) {
    await http.close();
    unlock();
    throw e;
  }
}
