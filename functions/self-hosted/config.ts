/** Configuration of the self-hosted Node adapter, parsed once from the environment. */
import { z } from "zod";

const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8787),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATA_DIR: z.string().min(1).default("./data"),
  DATABASE_URL: z.string().url().optional(),
  SECRET_KEYS: z.string().min(1).optional(),
  WORKSPACE_OWNER_TOKEN: z
    .string()
    .min(32, "WORKSPACE_OWNER_TOKEN must be at least 32 characters")
    .optional(),
  LOG_LEVEL: z.enum(["info", "silent"]).default("info"),
  SHARED_DOMAIN: z.string().min(1).default("localhost"),
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
};

export function loadNodeConfig(env: Record<string, string | undefined>): NodeConfig {
  const parsed = EnvSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== "")));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`Invalid configuration ${issue.path.join(".")}: ${issue.message}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    secretKeys: e.SECRET_KEYS,
    ownerToken: e.WORKSPACE_OWNER_TOKEN,
    logLevel: e.LOG_LEVEL,
    sharedDomain: e.SHARED_DOMAIN,
  };
}
