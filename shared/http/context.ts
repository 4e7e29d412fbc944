/** The one `AppEnv` of every router: bindings and per-request variables. */
import type { Context } from "hono";
import type { Keyring } from "../crypto/keyring";
import type { Db } from "../db/types";
import type { Role, Tag } from "../auth/permissions";
import type { Logger } from "./logger";

export type Mode = "cloud" | "self-hosted";

/** Deployment-wide configuration, parsed from the environment by each entry point. */
export interface ServiceConfig {
  mode: Mode;
  /** Free routes are `<project slug>.<sharedDomain>` (SHARED_DOMAIN). */
  sharedDomain: string;
}

/** Services one request uses. The Node adapter shares them; the Worker builds them per request. */
export interface RequestServices {
  db: Db;
  keyring: Keyring;
  config: ServiceConfig;
  /** Runs once the response is produced (the Worker ends its per-request Pool here). */
  release?: () => Promise<void>;
}

/** Who is calling: resolved by the auth middleware from the bearer token. */
export interface Caller {
  userId: string;
  tokenId: string;
  /** null = every tag of the role; otherwise the token's scopes. */
  scopes: string[] | null;
  /** The active organization (X-Organization-Id, else the user's default), if the caller is a member. */
  orgId: string | null;
  role: Role | null;
  /** Effective tags in the active organization: role tags ∩ token scopes. */
  tags: Tag[];
}

export interface AppEnv {
  Bindings: Record<string, unknown>;
  Variables: {
    requestId: string;
    db: Db;
    keyring: Keyring;
    config: ServiceConfig;
    clock: () => Date;
    logger: Logger;
    caller: Caller | undefined;
  };
}

export type AppContext = Context<AppEnv>;
