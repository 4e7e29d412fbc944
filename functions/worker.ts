/**
 * Cloud entry: the Cloudflare Worker. Postgres through the Neon serverless
 * driver, one WebSocket Pool per request, ended with `waitUntil`.
 *
 * Bindings: DATABASE_URL and SECRET_KEYS (secrets); NEON_WS_PROXY only for local
 * development and tests, where a WebSocket-to-TCP proxy stands in for Neon's.
 * Notifications: EMAIL_API_KEY (secret), EMAIL_API_URL and EMAIL_FROM for e-mail
 * through an HTTP e-mail API; OUTBOUND_ALLOW_PRIVATE only for local development.
 *
 * Folder uploads: presigned PUTs to S3-compatible storage (R2's S3 API, S3, …):
 * S3_ENDPOINT, S3_BUCKET, S3_REGION (default `us-east-1`, as on Node), S3_PREFIX (default
 * `uploads/`), and the secrets S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY. The cron
 * trigger also removes expired upload sessions and their objects.
 *
 * Git hosts: GIT_GITHUB_URL, GIT_GITLAB_URL, GIT_BITBUCKET_URL and GIT_GITEA_URL
 * point each provider at another base URL (the public hosts by default; Gitea
 * has none); git traffic goes through the outbound guard (OUTBOUND_ALLOW_PRIVATE).
 *
 * Storage caps per organization: ORG_ARTIFACT_QUOTA_MB (stored deployment artifacts,
 * default 5120) and ORG_WORKDIR_QUOTA_MB (runners' kept builds, default 20480); 0: no
 * cap. The cron trigger also removes the artifacts of failed, canceled and pruned
 * deployments that are left (functions/deployments/artifacts.ts).
 *
 * Retention: the cron trigger also sweeps every kind of row that grows with use (log lines
 * per kind, notifications, audit rows, sessions, …; the settings are vars, listed in
 * docs/operating.md). A log stream (SSE) keeps its
 * request's Pool until the stream ends; it polls once a second (shared/http/sse.ts).
 *
 * Delivery: after an event queues sends, the request drains the outbox in
 * `waitUntil` (its own Pool); the cron trigger (`scheduled`, every minute in
 * wrangler.toml) drains whatever is due, retries included.
 *
 * Early answers (413 on an oversized body): the answer is sent at once and ends once the
 * rest of the request body is read and discarded, within bounds, so the client reads it
 * rather than a reset (functions/worker-early-answer.ts).
 *
 * Apps (issue 22): a request whose Host is a project's free route, preview or connected
 * domain is forwarded, signed, to the build server running its current deployment
 * (functions/worker-edge.ts); API_HOSTS (comma-separated) names the API's own hosts:
 * set, any other Host is an app's (or the edge's 404) without a database read; unset,
 * a Host outside SHARED_DOMAIN costs one lookup of the connected domains.
 */
import type { Context, ExecutionContext } from "hono";
import { z } from "zod";
import { createKeyring, type Keyring } from "../shared/crypto/keyring";
import { openNeon, useLocalWsProxy } from "../shared/db/neon";
import type { AppEnv, RequestServices } from "../shared/http/context";
import { jsonLogger } from "../shared/http/logger";
import { createGuardedGitFetch } from "../shared/git/fetch";
import { type GitHosts, gitHostsFromEnv } from "../shared/git/hosts";
import type { GitService } from "../shared/http/context";
import { createEmailApiMailer } from "../shared/outbound/email-api";
import { createFetchOutbound } from "../shared/outbound/fetch";
import type { Mailer, Outbound } from "../shared/outbound/types";
import { type StorageQuotas, storageQuotasFromEnv } from "../shared/storage/quotas";
import { createS3Storage, DEFAULT_S3_REGION } from "../shared/storage/s3";
import type { UploadStorage } from "../shared/storage/types";
import { createApp } from "./app";
import { sweepExpiredUploads } from "./projects/folder/sweep";
import { sweepArtifacts } from "./deployments/artifacts";
import { createDeliveryEngine, type DeliveryPolicy, type DrainResult } from "./notifications/delivery/engine";
import type { Transports } from "./notifications/delivery/send";
import { describeError } from "../shared/http/error-log";
import { streamEnded } from "../shared/http/sse";
import { retentionFromEnv } from "./operations/retention/settings";
import { sweepRetention } from "./operations/retention/sweep";
import { answerBeforeBody, type DrainLimits } from "./worker-early-answer";
import { edgeTargetOf, serveAppRequest } from "./worker-edge";

const Bindings = z.object({
  DATABASE_URL: z.string().min(1),
  SECRET_KEYS: z.string().min(1),
  NEON_WS_PROXY: z.string().optional(),
  SHARED_DOMAIN: z.string().min(1),
  API_HOSTS: z.string().optional(),
  EMAIL_API_KEY: z.string().min(1).optional(),
  EMAIL_API_URL: z.string().url().optional(),
  EMAIL_FROM: z.string().min(3).optional(),
  OUTBOUND_ALLOW_PRIVATE: z.enum(["true", "false"]).optional(),
  S3_ENDPOINT: z.string().url().optional(),
  S3_REGION: z.string().min(1).default(DEFAULT_S3_REGION),
  S3_BUCKET: z.string().min(1).optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_PREFIX: z.string().default("uploads/"),
  GIT_GITHUB_URL: z.string().optional(),
  GIT_GITLAB_URL: z.string().optional(),
  GIT_BITBUCKET_URL: z.string().optional(),
  GIT_GITEA_URL: z.string().optional(),
  LOG_RETENTION_DAYS: z.string().optional(),
  LOG_RETENTION_LINES: z.string().optional(),
  ORG_ARTIFACT_QUOTA_MB: z.string().optional(),
  ORG_WORKDIR_QUOTA_MB: z.string().optional(),
});
type Env = z.infer<typeof Bindings>;

/** What tests (and only tests) replace: the transports and the retry timing. */
export interface WorkerOverrides {
  outbound?: Outbound;
  mailer?: Mailer;
  policy?: Partial<DeliveryPolicy>;
  /** How much of a request body is still read after an early answer (default DRAIN_BYTES, DRAIN_MS). */
  drain?: DrainLimits;
}

interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

// Sends due within this long are waited for inside one drain (a quick retry does not wait for the cron).
const LINGER_MS = 10_000;
const REQUEST_DRAIN_BUDGET_MS = 25_000;
const CRON_DRAIN_BUDGET_MS = 50_000;

// Parsed once per isolate and per distinct binding value.
let keyringCache: { spec: string; keyring: Promise<Keyring> } | undefined;
function keyringFor(spec: string): Promise<Keyring> {
  if (keyringCache?.spec !== spec) keyringCache = { spec, keyring: createKeyring(spec) };
  return keyringCache.keyring;
}

function parseBindings(raw: unknown): Env {
  const parsed = Bindings.safeParse(raw);
  if (!parsed.success) throw new Error(`Worker misconfigured: ${parsed.error.issues[0]!.path.join(".")} is missing or invalid`);
  if (parsed.data.NEON_WS_PROXY) useLocalWsProxy(parsed.data.NEON_WS_PROXY);
  return parsed.data;
}

// The S3 client is built once per isolate and per distinct configuration.
let uploadsCache: { spec: string; uploads: UploadStorage | undefined } | undefined;
function uploadsFor(env: Env): UploadStorage | undefined {
  const { S3_ENDPOINT: endpoint, S3_BUCKET: bucket, S3_ACCESS_KEY_ID: accessKeyId, S3_SECRET_ACCESS_KEY: secretAccessKey } = env;
  const spec = JSON.stringify([endpoint, env.S3_REGION, bucket, accessKeyId, secretAccessKey, env.S3_PREFIX]);
  if (uploadsCache?.spec !== spec) {
    const configured = endpoint && bucket && accessKeyId && secretAccessKey;
    uploadsCache = {
      spec,
      uploads: configured ? createS3Storage({ endpoint, region: env.S3_REGION, bucket, accessKeyId, secretAccessKey, prefix: env.S3_PREFIX }) : undefined,
    };
  }
  return uploadsCache.uploads;
}

// Git hosts and transport, once per isolate and per distinct configuration; a malformed GIT_* setting fails every request naming it.
let gitCache: { spec: string; git: GitService } | undefined;
function gitFor(env: Env): GitService {
  const spec = JSON.stringify([env.GIT_GITHUB_URL, env.GIT_GITLAB_URL, env.GIT_BITBUCKET_URL, env.GIT_GITEA_URL, env.OUTBOUND_ALLOW_PRIVATE]);
  if (gitCache?.spec !== spec) {
    let hosts: GitHosts;
    try {
      hosts = gitHostsFromEnv(env);
    } catch (e) {
      throw new Error(`Worker misconfigured: ${(e as Error).message}`);
    }
    gitCache = { spec, git: { hosts, fetch: createGuardedGitFetch({ allowPrivate: env.OUTBOUND_ALLOW_PRIVATE === "true" }) } };
  }
  return gitCache.git;
}

/** Removes expired upload sessions and their objects, and artifacts no deployment can use any more (cron), on a Pool of its own. */
async function sweepUploads(env: Env): Promise<void> {
  const uploads = uploadsFor(env);
  if (!uploads) return;
  const { db, close } = openNeon(env.DATABASE_URL);
  try {
    const now = new Date();
    await sweepExpiredUploads({ db, uploads, now, logger: jsonLogger() });
    await sweepArtifacts({ db, uploads, now, logger: jsonLogger() });
  } finally {
    await close();
  }
}

/** Applies the retention of every kind (cron; settings in docs/operating.md, read from the vars), on a Pool of its own. */
async function sweepRetentionStore(env: Env, vars: Record<string, unknown>): Promise<void> {
  const settings = retentionFromEnv(vars);
  const { db, close } = openNeon(env.DATABASE_URL);
  try {
    const { removed, failed } = await sweepRetention(db, settings, new Date());
    const some = Object.fromEntries(Object.entries(removed).filter(([, n]) => n > 0));
    if (Object.keys(some).length > 0) jsonLogger().info("retention sweep: removed rows", some);
    for (const [kind, error] of Object.entries(failed)) jsonLogger().error("retention sweep failed", { kind, error });
  } finally {
    await close();
  }
}

function transportsFor(env: Env, overrides: WorkerOverrides): Transports {
  return {
    outbound: overrides.outbound ?? createFetchOutbound({ allowPrivate: env.OUTBOUND_ALLOW_PRIVATE === "true" }),
    mailer:
      overrides.mailer ??
      (env.EMAIL_API_KEY
        ? createEmailApiMailer({ apiKey: env.EMAIL_API_KEY, url: env.EMAIL_API_URL, from: env.EMAIL_FROM ?? "Workspace <notifications@localhost>" })
        : undefined),
  };
}

/** ORG_ARTIFACT_QUOTA_MB and ORG_WORKDIR_QUOTA_MB (vars); a malformed one fails every request naming it. */
function quotasFor(env: Env): StorageQuotas {
  try {
    return storageQuotasFromEnv(env);
  } catch (e) {
    throw new Error(`Worker misconfigured: ${(e as Error).message}`);
  }
}

/** Drains the outbox on a Pool of its own (the request's is ended when the response is sent). */
async function drainOutbox(env: Env, overrides: WorkerOverrides, budgetMs: number): Promise<DrainResult> {
  const { db, close } = openNeon(env.DATABASE_URL);
  try {
    const engine = createDeliveryEngine({
      db,
      keyring: await keyringFor(env.SECRET_KEYS),
      transports: transportsFor(env, overrides),
      logger: jsonLogger(),
      policy: overrides.policy,
    });
    return await engine.drain({ budgetMs, lingerMs: LINGER_MS });
  } finally {
    await close();
  }
}

function logDrainError(e: unknown) {
  jsonLogger().error("notification drain failed", describeError(e));
}

/** How long the edge holds a request for an app that is starting or waking on its server. */
const EDGE_HOLD_MS = 30_000;

/** API_HOSTS as hostnames (lower case, no port or trailing dot). */
const apiHostsOf = (env: Env) =>
  (env.API_HOSTS ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase().replace(/\.$/, ""))
    .filter((h) => h !== "");

/**
 * An app's request: forwarded to its server (functions/worker-edge.ts) on a Pool of its
 * own, released once the answer has ended and its log line is written; undefined: the API's.
 */
async function appRequest(request: Request, rawEnv: unknown, ctx: WaitUntil): Promise<Response | undefined> {
  const env = parseBindings(rawEnv);
  const apiHosts = apiHostsOf(env);
  const { db, close } = openNeon(env.DATABASE_URL);
  const pending: Promise<unknown>[] = [];
  try {
    const target = await edgeTargetOf(request, { db, sharedDomain: env.SHARED_DOMAIN, apiHosts });
    if (target === "api") return undefined;
    return await serveAppRequest(request, target, {
      db,
      keyring: await keyringFor(env.SECRET_KEYS),
      sharedDomain: env.SHARED_DOMAIN,
      apiHosts,
      holdMs: EDGE_HOLD_MS,
      allowPrivate: env.OUTBOUND_ALLOW_PRIVATE === "true",
      logger: jsonLogger(),
      waitUntil: (p) => pending.push(p),
    });
  } finally {
    ctx.waitUntil(Promise.allSettled(pending).then(close));
  }
}

/** The Worker's static assets (wrangler.toml `[assets] binding`). */
interface AssetsBinding {
  fetch(request: Request): Promise<Response>;
}

/**
 * The console's file for an API host's GET outside /api; undefined: the Worker's own routes answer
 * (/healthz, /readyz, the API's 404). wrangler.toml runs the Worker first for every request
 * (run_worker_first = true) because assets are matched by path alone: served first, they
 * answered an app's `/` (and any path the console has) with the console's own file.
 */
async function consoleAsset(request: Request, rawEnv: unknown): Promise<Response | undefined> {
  if (request.method !== "GET" && request.method !== "HEAD") return undefined;
  const path = new URL(request.url).pathname;
  if (path === "/api" || path.startsWith("/api/")) return undefined;
  const assets = (rawEnv as { ASSETS?: AssetsBinding } | undefined)?.ASSETS;
  if (!assets) return undefined;
  const res = await assets.fetch(request);
  if (res.status !== 404) return res;
  await res.body?.cancel();
  return undefined;
}

export function createWorker(overrides: WorkerOverrides = {}) {
  async function services(c: Context<AppEnv>): Promise<RequestServices> {
    const env = parseBindings(c.env);
    const { db, close } = openNeon(env.DATABASE_URL);
    const transports = transportsFor(env, overrides);
    return {
      db,
      keyring: await keyringFor(env.SECRET_KEYS),
      uploads: uploadsFor(env),
      git: gitFor(env),
      config: { mode: "cloud", sharedDomain: env.SHARED_DOMAIN, storageQuotas: quotasFor(env), outboundAllowPrivate: env.OUTBOUND_ALLOW_PRIVATE === "true" },
      outbound: transports.outbound,
      mailer: transports.mailer,
      wakeDeliveries: () => c.executionCtx.waitUntil(drainOutbox(env, overrides, REQUEST_DRAIN_BUDGET_MS).catch(logDrainError)),
      // An event stream (logs) reads on this Pool until it ends; everything else is done once the response exists.
      release: async () => c.executionCtx.waitUntil(streamEnded(c).then(close)),
    };
  }

  const app = createApp({ services });
  const api = answerBeforeBody<Record<string, unknown>, ExecutionContext>((request, env, ctx) => app.fetch(request, env, ctx), overrides.drain);
  return {
    fetch: async (request: Request, env: Record<string, unknown>, ctx: ExecutionContext) =>
      (await appRequest(request, env, ctx)) ?? (await consoleAsset(request, env)) ?? api(request, env, ctx),
    /** Cron trigger: deliver what is due (retries, and anything a request's drain did not finish); remove stale uploads; apply the retention. */
    async scheduled(_controller: unknown, rawEnv: unknown, _ctx: WaitUntil): Promise<void> {
      const env = parseBindings(rawEnv);
      await Promise.all([
        drainOutbox(env, overrides, CRON_DRAIN_BUDGET_MS).catch(logDrainError),
        sweepUploads(env).catch((e) => jsonLogger().error("upload sweep failed", describeError(e))),
        sweepRetentionStore(env, rawEnv as Record<string, unknown>).catch((e) => jsonLogger().error("retention sweep failed", describeError(e))),
      ]);
    },
  };
}

export default createWorker();
