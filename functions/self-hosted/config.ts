/** Configuration of the self-hosted Node adapter, parsed once from the environment. */
import { z } from "zod";
import { type GitHosts, gitHostsFromEnv } from "../../shared/git/hosts";
import { DEFAULT_S3_REGION, type S3Settings } from "../../shared/storage/s3";

const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8787),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATA_DIR: z.string().min(1).default("./data"),
  DATABASE_URL: z.string().url().optional(),
  SECRET_KEYS: z.string().min(1).optional(),
  WORKSPACE_OWNER_TOKEN: z.string().min(32, "WORKSPACE_OWNER_TOKEN must be at least 32 characters").optional(),
  LOG_LEVEL: z.enum(["info", "silent"]).default("info"),
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
  S3_ENDPOINT: z.string().url().optional(),
  S3_REGION: z.string().min(1).default(DEFAULT_S3_REGION),
  S3_BUCKET: z.string().min(1).optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_PREFIX: z.string().default("uploads/"),
});

export type NodeConfig = {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl?: string;
  secretKeys?: string;
  ownerToken?: string;
  logLevel: "info" | "silent";
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
  /** Folder uploads to S3-compatible storage (presigned) instead of DATA_DIR/uploads (relay). */
  s3?: S3Settings;
  /** Base URL per git provider: GIT_GITHUB_URL, GIT_GITLAB_URL, GIT_BITBUCKET_URL, GIT_GITEA_URL, else the public hosts. */
  gitHosts: GitHosts;
};

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
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    secretKeys: e.SECRET_KEYS,
    ownerToken: e.WORKSPACE_OWNER_TOKEN,
    logLevel: e.LOG_LEVEL,
    sharedDomain: e.SHARED_DOMAIN,
    smtpUrl: e.SMTP_URL,
    emailApiKey: e.EMAIL_API_KEY,
    emailApiUrl: e.EMAIL_API_URL,
    emailFrom: e.EMAIL_FROM,
    outboundAllowPrivate: e.OUTBOUND_ALLOW_PRIVATE === "true" || e.OUTBOUND_ALLOW_PRIVATE === "1",
    publicUrl: e.PUBLIC_URL,
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
