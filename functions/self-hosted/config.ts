/** Configuration of the self-hosted Node adapter, parsed once from the environment. */
import { createHash } from "node:crypto";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { z } from "zod";
import { type GitHosts, gitHostsFromEnv } from "../../shared/git/hosts";
import { type RetentionSettings, retentionFromEnv } from "../operations/retention/settings";
import { type Cidr, cidrProblem, parseCidr } from "../../shared/net/cidr";
import { type StorageQuotas, storageQuotasFromEnv } from "../../shared/storage/quotas";
import { configuredApiHosts } from "./api-hosts";
import type { RestartPolicy } from "./runner/types";
import type { SandboxSettings } from "./runner/sandbox/sandbox";
import type { UidRange } from "./runner/sandbox/uids";
import { DEFAULT_S3_REGION, type S3Settings } from "../../shared/storage/s3";
import { DEFAULT_OWNER_EMAIL } from "../identity/store";
import { type MetricsSettings, metricsSettingsFromEnv } from "../operations/metrics/settings";
import { type BackupSchedule, backupScheduleFromEnv } from "../operations/backup/schedule";

const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8787),
  HOST: z.string().min(1).default("127.0.0.1"),
  // Absolute from here on: the sandbox binds paths under it, and bubblewrap refuses a relative source path.
  DATA_DIR: z
    .string()
    .min(1)
    .default("./data")
    .transform((p) => resolve(p)),
  DATABASE_URL: z.string().url().optional(),
  SECRET_KEYS: z.string().min(1).optional(),
  SECRET_KEYS_FILE: z.string().min(1).optional(),
  WORKSPACE_OWNER_TOKEN: z.string().min(32, "WORKSPACE_OWNER_TOKEN must be at least 32 characters").optional(),
  WORKSPACE_OWNER_EMAIL: z
    .email("WORKSPACE_OWNER_EMAIL must be an e-mail address, e.g. you@example.com")
    .max(320, "WORKSPACE_OWNER_EMAIL must be an e-mail address, e.g. you@example.com")
    .transform((e) => e.toLowerCase())
    .default(DEFAULT_OWNER_EMAIL),
  LOG_LEVEL: z.enum(["debug", "info", "silent"], { message: "LOG_LEVEL must be debug, info or silent" }).default("info"),
  LOG_REQUESTS: z.enum(["true", "false", "1", "0"], { message: "LOG_REQUESTS must be true or false" }).optional(),
  SHARED_DOMAIN: z.string().min(1).default("localhost"),
  SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\/[^/]/, "SMTP_URL must be smtp://… or smtps://…")
    .optional(),
  EMAIL_API_KEY: z.string().min(1).optional(),
  EMAIL_API_URL: z.string().url().optional(),
  EMAIL_FROM: z.string().min(3).default("Workspace <notifications@localhost>"),
  OUTBOUND_ALLOW_PRIVATE: z.enum(["true", "false", "1", "0"]).default("false"),
  PUBLIC_URL: z.string().url().optional(),
  API_HOSTS: z.string().max(4096).optional(),
  MAX_CONNECTIONS_PER_CLIENT: z.coerce
    .number()
    .int()
    .min(1, "MAX_CONNECTIONS_PER_CLIENT must be 1 to 1000000")
    .max(1_000_000, "MAX_CONNECTIONS_PER_CLIENT must be 1 to 1000000")
    .default(256),
  S3_ENDPOINT: z.string().url().optional(),
  S3_REGION: z.string().min(1).default(DEFAULT_S3_REGION),
  S3_BUCKET: z.string().min(1).optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_PREFIX: z.string().default("uploads/"),
  TRUSTED_PROXIES: z.string().max(4096).optional(),
  LOCAL_ROOTS: z.string().max(16_384).optional(),
  CLOUD_API_URL: z.string().url("CLOUD_API_URL must be a URL like https://api.example.com").optional(),
  CLOUD_TOKEN: z.string().min(16, "CLOUD_TOKEN must be a personal access token of the cloud").max(512).optional(),
  CLOUD_ORGANIZATION_ID: z.string().min(1).max(100).optional(),
  RUNNER: z.enum(["on", "off"], { message: "RUNNER must be on or off" }).default("on"),
  RUNNER_CONCURRENCY: z.coerce.number().int().min(1, "RUNNER_CONCURRENCY must be 1 to 32").max(32, "RUNNER_CONCURRENCY must be 1 to 32").default(1),
  BUILD_TIMEOUT: z.string().default("15m"),
  HEALTH_TIMEOUT: z.string().default("60s"),
  STOP_GRACE: z.string().default("10s"),
  SMOKE_WINDOW: z.string().default("10s"),
  SLEEP_AFTER: z.string().default("15m"),
  RUNNER_SANDBOX: z.enum(["on", "off"], { message: "RUNNER_SANDBOX must be on or off" }).default("on"),
  RUNNER_UID_RANGE: z
    .string()
    .regex(/^\d{1,10}-\d{1,10}$/, "RUNNER_UID_RANGE must be FIRST-LAST, e.g. 200000-299999")
    .default("200000-299999"),
  RUNNER_PIDS_MAX: z.coerce.number().int().min(16, "RUNNER_PIDS_MAX must be 16 to 65536").max(65536, "RUNNER_PIDS_MAX must be 16 to 65536").default(256),
  RUNNER_NOFILE: z.coerce.number().int().min(64, "RUNNER_NOFILE must be 64 to 1048576").max(1_048_576, "RUNNER_NOFILE must be 64 to 1048576").default(4096),
  RUNNER_LOG_RATE: z.coerce
    .number()
    .int()
    .min(10, "RUNNER_LOG_RATE must be 10 to 100000 lines per second")
    .max(100_000, "RUNNER_LOG_RATE must be 10 to 100000 lines per second")
    .default(1000),
  BUILD_ENV_PASSTHROUGH: z.string().max(4096).optional(),
  RUNNER_ID: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, "RUNNER_ID must be 1-100 letters, digits, '.', '_', ':' or '-'")
    .optional(),
});

/**
 * A duration setting: plain seconds (`900`) or a number with a unit (`900s`,
 * `15m`, `1h`, `500ms`), in milliseconds. Thrown with the setting's name.
 */
export function parseDuration(name: string, raw: string, bounds: { minMs: number; maxMs: number }): number {
  const m = /^(\d{1,9})(ms|s|m|h)?$/.exec(raw.trim());
  if (!m) throw new Error(`Invalid configuration ${name}: must be seconds or a duration like 15m, 900s`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] ?? "s"]!;
  const ms = Number(m[1]) * unit;
  if (ms < bounds.minMs || ms > bounds.maxMs)
    throw new Error(`Invalid configuration ${name}: must be between ${bounds.minMs / 1000} s and ${bounds.maxMs / 1000} s`);
  return ms;
}

/**
 * The self-hosted runner's settings (functions/self-hosted/runner/):
 * - RUNNER (on|off, default on): whether this process builds and runs deployments.
 * - RUNNER_CONCURRENCY (default 1): deployments built at once by this process.
 * - BUILD_TIMEOUT (default 15m): source + install + build; past it the build's process group is killed and the deployment fails.
 * - HEALTH_TIMEOUT (default 60s): how long a started app has to answer HTTP on its PORT.
 * - STOP_GRACE (default 10s): SIGTERM to SIGKILL when an app is stopped (replaced, server stop).
 * - SMOKE_WINDOW (default 10s): how long a new app must stay up (no crash, health check still passing) after it
 *   first passed its health check before its deployment is ready; 0 turns the window off.
 * - RUNNER_SANDBOX (on|off, default on), RUNNER_UID_RANGE (default 200000-299999), RUNNER_PIDS_MAX (default 256),
 *   RUNNER_NOFILE (default 4096): the sandbox every step and app runs in (runner/sandbox/sandbox.ts).
 * - RUNNER_LOG_RATE (default 1000): build and runtime lines stored per second per deployment (bursts up to 2x); the rest are dropped and counted.
 * - BUILD_ENV_PASSTHROUGH: the server's variables builds see (proxy, CA, npm registry settings; see DEFAULT_BUILD_ENV_PASSTHROUGH).
 * - RUNNER_ID (default: `<hostname>:<hash of the absolute DATA_DIR>`): the name a runner claims jobs and serves apps
 *   under; stable per machine and data directory, so a restart of the same instance brings back its own apps.
 */
export interface RunnerSettings {
  enabled: boolean;
  concurrency: number;
  buildTimeoutMs: number;
  healthTimeoutMs: number;
  stopGraceMs: number;
  /** SMOKE_WINDOW: a new app stays up this long after its first health check before it is ready (0: no window). */
  smokeWindowMs: number;
  /** SLEEP_AFTER: an `auto_sleep` app without a request for this long is stopped until the next one. */
  sleepAfterMs: number;
  id: string;
  sandbox: SandboxSettings;
  /** RUNNER_LOG_RATE: lines per second per deployment. */
  logRate: number;
  /** The server's variables (names) passed into builds, and their values as read at start. */
  buildEnv: Record<string, string>;
  /** The crash-restart policy; not configurable (supervisor.ts's default), the test suites shorten it. */
  restart?: RestartPolicy;
}

/** What builds behind a proxy or a private CA need from the server's environment, when BUILD_ENV_PASSTHROUGH is not set. */
export const DEFAULT_BUILD_ENV_PASSTHROUGH = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "npm_config_registry",
  "npm_config_cafile",
  "npm_config_strict_ssl",
];

/** Settings of the server that never reach a build, whatever BUILD_ENV_PASSTHROUGH says. */
const NEVER_PASSED =
  /^(SECRET_KEYS|SECRET_KEYS_FILE|DATABASE_URL|WORKSPACE_OWNER_TOKEN|CLOUD_TOKEN|S3_SECRET_ACCESS_KEY|S3_ACCESS_KEY_ID|SMTP_URL|EMAIL_API_KEY|METRICS_TOKEN)$/;

/** BUILD_ENV_PASSTHROUGH (comma-separated names) → the values the server has for them now. */
export function buildEnvPassthrough(raw: string | undefined, env: Record<string, string | undefined>): Record<string, string> {
  const names =
    raw === undefined
      ? DEFAULT_BUILD_ENV_PASSTHROUGH
      : raw
          .split(",")
          .map((n) => n.trim())
          .filter((n) => n !== "");
  const out: Record<string, string> = {};
  for (const name of names) {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name))
      throw new Error(`Invalid configuration BUILD_ENV_PASSTHROUGH: '${name.slice(0, 40)}' is not a variable name`);
    if (NEVER_PASSED.test(name)) throw new Error(`Invalid configuration BUILD_ENV_PASSTHROUGH: ${name} is a secret of the server and never reaches a build`);
    const value = env[name];
    if (value !== undefined && value !== "") out[name] = value;
  }
  return out;
}

/**
 * A secret setting read from a file (e.g. SECRET_KEYS_FILE), so it is not in the
 * server's environment (`/proc/<pid>/environ`, which root and the server's user
 * can read, and which nothing it spawns inherits anyway). The file must not be
 * readable by group or others; at most 64 KiB; surrounding whitespace dropped.
 */
export function readSecretFile(name: string, path: string, alsoSet: string | undefined): string {
  if (alsoSet) throw new Error(`Invalid configuration ${name}: set either ${name.replace(/_FILE$/, "")} or ${name}, not both`);
  let info: ReturnType<typeof statSync>;
  try {
    info = statSync(path);
  } catch {
    throw new Error(`Invalid configuration ${name}: ${path} does not exist`);
  }
  if (!info.isFile() || info.size > 64 * 1024) throw new Error(`Invalid configuration ${name}: ${path} is not a file of at most 64 KiB`);
  if (info.mode & 0o077) throw new Error(`Invalid configuration ${name}: ${path} is readable by group or others (chmod 600 it)`);
  const value = readFileSync(path, "utf8").trim();
  if (!value) throw new Error(`Invalid configuration ${name}: ${path} is empty`);
  return value;
}

/** RUNNER_UID_RANGE: FIRST-LAST, never holding 0 or the server's own uid. */
export function parseUidRange(raw: string, serverUid: number | undefined): UidRange {
  const [first, last] = raw.split("-").map(Number) as [number, number];
  const problem = (why: string) => new Error(`Invalid configuration RUNNER_UID_RANGE: ${why}`);
  if (first < 1000 || last > 4_294_967_294 || first > last) throw problem("must be FIRST-LAST with 1000 <= FIRST <= LAST (e.g. 200000-299999)");
  if (serverUid !== undefined && serverUid >= first && serverUid <= last) throw problem(`holds the server's own uid ${serverUid}`);
  return { first, last };
}

export type NodeConfig = {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl?: string;
  secretKeys?: string;
  ownerToken?: string;
  /** WORKSPACE_OWNER_EMAIL (default DEFAULT_OWNER_EMAIL): the address of the owner created on first start, the one to sign in with by e-mailed code. */
  ownerEmail: string;
  /** LOG_LEVEL: `info` (default) prints the start lines, errors and a line per deployment state change; `debug` adds a line per request; `silent` prints none of them. */
  logLevel: "debug" | "info" | "silent";
  /** A JSON line per API request (LOG_REQUESTS=true, or LOG_LEVEL=debug unless LOG_REQUESTS=false); off by default: the console polls every few seconds. */
  logRequests: boolean;
  sharedDomain: string;
  /** E-mail notifications: SMTP when set, else the HTTP e-mail API when emailApiKey is set. */
  smtpUrl?: string;
  emailApiKey?: string;
  emailApiUrl?: string;
  emailFrom: string;
  /** Let notification sends reach loopback and private networks (metadata addresses stay refused). */
  outboundAllowPrivate: boolean;
  /** Base of absolute relay URLs handed to upload clients (behind a proxy); default: the origin each request came to. */
  publicUrl?: string;
  /**
   * The configured names of the API (lower-case hostnames): PUBLIC_URL's host and the API_HOSTS list. With the loopback
   * names and the bound addresses (api-hosts.ts) they are the only Hosts the API answers; no project can take one.
   */
  apiHosts: string[];
  /** MAX_CONNECTIONS_PER_CLIENT (default 256): open connections one client address may hold; TRUSTED_PROXIES are not capped. */
  maxConnectionsPerClient: number;
  /** Folder uploads to S3-compatible storage (presigned) instead of DATA_DIR/uploads (relay). */
  s3?: S3Settings;
  /** Base URL per git provider: GIT_GITHUB_URL, GIT_GITLAB_URL, GIT_BITBUCKET_URL, GIT_GITEA_URL, else the public hosts. */
  gitHosts: GitHosts;
  runner: RunnerSettings;
  /** TRUSTED_PROXIES: the proxies whose X-Forwarded-For the edge and the sign-in limits believe (CIDR blocks); empty: none, the connection's peer is the client. */
  trustedProxies: Cidr[];
  /** Every kind's retention (functions/operations/retention/settings.ts; docs/operating.md): the retention sweeper's bounds. */
  retention: RetentionSettings;
  /** LOCAL_ROOTS: the folders (real paths, checked at start) local-folder projects may live under; empty: local folders are off. */
  localRoots: string[];
  /** ORG_ARTIFACT_QUOTA_MB and ORG_WORKDIR_QUOTA_MB: each organization's caps on stored artifacts and kept work directories. */
  storageQuotas: StorageQuotas;
  /** CLOUD_API_URL, CLOUD_TOKEN (and CLOUD_ORGANIZATION_ID): the cloud link of this instance's first organization; the URL alone is the default of PUT /api/cloud/link. */
  cloud: { apiUrl?: string; token?: string; organizationId?: string };
  /** METRICS_BIND and METRICS_TOKEN: where GET /metrics is served, and the token it takes (functions/operations/metrics/settings.ts); neither: not served. */
  metrics?: MetricsSettings;
  /** BACKUP_SCHEDULE, BACKUP_DIR, BACKUP_KEEP: backups the running server takes of itself (functions/operations/backup/schedule.ts); unset: none. */
  backups?: BackupSchedule;
};

/** LOCAL_ROOTS: comma-separated absolute folders; each must exist and be a directory; kept as real paths (symbolic links resolved), deduplicated. */
export function parseLocalRoots(raw: string | undefined): string[] {
  const roots: string[] = [];
  for (const item of (raw ?? "").split(",").map((t) => t.trim())) {
    if (item === "") continue;
    const problem = (why: string) => new Error(`Invalid configuration LOCAL_ROOTS: '${item}' ${why}`);
    if (!isAbsolute(item)) throw problem("is not an absolute path");
    let real: string;
    try {
      real = realpathSync(item);
    } catch {
      throw problem("does not exist");
    }
    if (!statSync(real).isDirectory()) throw problem("is not a directory");
    if (!roots.includes(real)) roots.push(real);
  }
  return roots;
}

export function loadNodeConfig(env: Record<string, string | undefined>): NodeConfig {
  const parsed = EnvSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== "")));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`Invalid configuration ${issue.path.join(".")}: ${issue.message}`);
  }
  const e = parsed.data;
  const s3Keys = ["S3_BUCKET", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"] as const;
  if (e.S3_ENDPOINT) {
    const missing = s3Keys.find((k) => !e[k]);
    if (missing) throw new Error(`Invalid configuration ${missing}: required when S3_ENDPOINT is set`);
  }
  let gitHosts: GitHosts;
  try {
    gitHosts = gitHostsFromEnv(env);
  } catch (error) {
    throw new Error(`Invalid configuration ${(error as Error).message}`);
  }
  const runner: RunnerSettings = {
    enabled: e.RUNNER === "on",
    concurrency: e.RUNNER_CONCURRENCY,
    buildTimeoutMs: parseDuration("BUILD_TIMEOUT", e.BUILD_TIMEOUT, { minMs: 1000, maxMs: 24 * 3_600_000 }),
    healthTimeoutMs: parseDuration("HEALTH_TIMEOUT", e.HEALTH_TIMEOUT, { minMs: 1000, maxMs: 3_600_000 }),
    stopGraceMs: parseDuration("STOP_GRACE", e.STOP_GRACE, { minMs: 0, maxMs: 600_000 }),
    smokeWindowMs: parseDuration("SMOKE_WINDOW", e.SMOKE_WINDOW, { minMs: 0, maxMs: 600_000 }),
    sleepAfterMs: parseDuration("SLEEP_AFTER", e.SLEEP_AFTER, { minMs: 1000, maxMs: 30 * 24 * 3_600_000 }),
    id: e.RUNNER_ID ?? `${hostname()}:${createHash("sha256").update(resolve(e.DATA_DIR)).digest("hex").slice(0, 12)}`,
    sandbox: {
      enabled: e.RUNNER_SANDBOX === "on",
      uidRange: parseUidRange(e.RUNNER_UID_RANGE, process.getuid?.()),
      pidsMax: e.RUNNER_PIDS_MAX,
      nofile: e.RUNNER_NOFILE,
    },
    logRate: e.RUNNER_LOG_RATE,
    buildEnv: buildEnvPassthrough(e.BUILD_ENV_PASSTHROUGH, env),
  };
  const trustedProxies = (e.TRUSTED_PROXIES ?? "")
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "")
    .map((t) => {
      const cidr = parseCidr(t);
      if (!cidr) throw new Error(`Invalid configuration TRUSTED_PROXIES: '${t}' ${cidrProblem(t)}`);
      return cidr;
    });
  // Throws "Invalid configuration LOG_RETENTION_…: …" naming the setting.
  const retention = retentionFromEnv(env);
  const localRoots = parseLocalRoots(e.LOCAL_ROOTS);
  if (e.CLOUD_TOKEN && !e.CLOUD_API_URL) throw new Error("Invalid configuration CLOUD_TOKEN: set CLOUD_API_URL too (the cloud API the token belongs to)");
  return {
    storageQuotas: storageQuotasFromEnv(env),
    metrics: metricsSettingsFromEnv(env),
    backups: backupScheduleFromEnv(env, e.DATA_DIR),
    localRoots,
    cloud: { apiUrl: e.CLOUD_API_URL, token: e.CLOUD_TOKEN, organizationId: e.CLOUD_ORGANIZATION_ID },
    runner,
    trustedProxies,
    retention,
    port: e.PORT,
    host: e.HOST,
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    secretKeys: e.SECRET_KEYS_FILE ? readSecretFile("SECRET_KEYS_FILE", e.SECRET_KEYS_FILE, e.SECRET_KEYS) : e.SECRET_KEYS,
    ownerToken: e.WORKSPACE_OWNER_TOKEN,
    ownerEmail: e.WORKSPACE_OWNER_EMAIL,
    logLevel: e.LOG_LEVEL,
    logRequests: e.LOG_REQUESTS === undefined ? e.LOG_LEVEL === "debug" : e.LOG_REQUESTS === "true" || e.LOG_REQUESTS === "1",
    sharedDomain: e.SHARED_DOMAIN,
    smtpUrl: e.SMTP_URL,
    emailApiKey: e.EMAIL_API_KEY,
    emailApiUrl: e.EMAIL_API_URL,
    emailFrom: e.EMAIL_FROM,
    outboundAllowPrivate: e.OUTBOUND_ALLOW_PRIVATE === "true" || e.OUTBOUND_ALLOW_PRIVATE === "1",
    publicUrl: e.PUBLIC_URL,
    apiHosts: configuredApiHosts(e.PUBLIC_URL, e.API_HOSTS),
    maxConnectionsPerClient: e.MAX_CONNECTIONS_PER_CLIENT,
    gitHosts,
    s3: e.S3_ENDPOINT
      ? {
          endpoint: e.S3_ENDPOINT,
          region: e.S3_REGION,
          bucket: e.S3_BUCKET!,
          accessKeyId: e.S3_ACCESS_KEY_ID!,
          secretAccessKey: e.S3_SECRET_ACCESS_KEY!,
          prefix: e.S3_PREFIX,
        }
      : undefined,
  };
}
