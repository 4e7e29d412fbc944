/** The one `AppEnv` of every router: bindings and per-request variables. */
import type { Context } from "hono";
import type { AuthCache } from "../auth/auth-cache";
import type { WakeFeed } from "../wake-feed";
import type { LogFeed } from "../logs/feed";
import type { Keyring } from "../crypto/keyring";
import type { Db } from "../db/types";
import type { GitFetch } from "../git/fetch";
import type { GitHosts } from "../git/hosts";
import type { Mailer, Outbound } from "../outbound/types";
import type { Gunzip } from "../storage/gunzip";
import type { LocalFolders } from "../storage/local-folders";
import type { StorageQuotas } from "../storage/quotas";
import type { UploadStorage } from "../storage/types";
import type { Role, Tag } from "../auth/permissions";
import type { Logger } from "./logger";

export type Mode = "cloud" | "self-hosted";

/** Deployment-wide configuration, parsed from the environment by each entry point. */
export interface ServiceConfig {
  mode: Mode;
  /** Free routes are `<project slug>.<sharedDomain>` (SHARED_DOMAIN). */
  sharedDomain: string;
  /** PUBLIC_URL (Node adapter): the base git hosts reach this instance at unless a project sets its webhook domain; unset: the request's origin. */
  publicUrl?: string;
  /** The configured names of the API (Node adapter: PUBLIC_URL's host and API_HOSTS): never a project's domain, free route or preview. */
  apiHosts?: string[];
  /** CLOUD_API_URL (Node adapter): the default cloud API of PUT /api/cloud/link. */
  cloudApiUrl?: string;
  /** TRUSTED_PROXIES (Node adapter): proxies whose X-Forwarded-For names the client for the sign-in limits; absent or empty: the connection's peer. */
  trustedProxies?: import("../net/cidr").Cidr[];
  /** ORG_ARTIFACT_QUOTA_MB and ORG_WORKDIR_QUOTA_MB: the per-organization storage caps POST /api/deployments enforces; absent: the defaults (shared/storage/quotas.ts). */
  storageQuotas?: StorageQuotas;
  /** Self-hosted: this process runs the in-process runner (RUNNER=on and its sandbox works), so `auto` placement builds here. Absent: it does not (the Worker never does). */
  localRunner?: boolean;
  /** OUTBOUND_ALLOW_PRIVATE: a build server's publicUrl may be a loopback or private address (functions/servers/public-url-guard.ts). Absent: refused. */
  outboundAllowPrivate?: boolean;
}

export interface EdgeRoutes {
  serves(projectId: string, hostname: string): Promise<boolean>;
}

/** One page of the linked cloud organization's projects (already checked against the Project shape), or why it could not be read. */
export type CloudProjectsPage = { reachable: true; items: unknown[]; nextCursor: string | null } | { reachable: false; reason: string };

/** The cloud link's part in requests (self-hosted adapter, functions/cloud/service.ts); absent on the Worker. */
export interface CloudService {
  /** Forwards a per-project request whose project lives in the linked cloud and returns the cloud's answer; undefined: the project is handled here. */
  forward(c: Context<AppEnv>, bodyLimit: number): Promise<Response | undefined>;
  /** One page of the linked cloud organization's projects for the home feed; undefined when the organization is not linked. */
  projects(c: Context<AppEnv>, limit: number, cursor?: string): Promise<CloudProjectsPage | undefined>;
  /** Called as each transfer step starts (tests stop a side between steps here). */
  beforeTransferStep?: (direction: "to-cloud" | "to-self-hosted", step: string) => Promise<void>;
}

/** Git hosts (provider → base URL) and the guarded transport git traffic goes through. */
export interface GitService {
  hosts: GitHosts;
  fetch: GitFetch;
}

/** Services one request uses. The Node adapter shares them; the Worker builds them per request. */
export interface RequestServices {
  db: Db;
  keyring: Keyring;
  config: ServiceConfig;
  /** Runs once the response is produced (the Worker ends its per-request Pool here). */
  release?: () => Promise<void>;
  /** Outbound HTTP to user-supplied URLs (webhooks, chat hooks); SSRF-guarded on Node. Default: fetch, refusing private literals. */
  outbound?: Outbound;
  /** E-mail transport (SMTP on Node, an HTTP e-mail API on the Worker); absent when none is configured. */
  mailer?: Mailer;
  /** Called after notification sends are queued: wakes the Node delivery engine, or drains in waitUntil on the Worker. */
  wakeDeliveries?: () => void;
  /** Called after a deployment was queued, canceled or promoted: wakes the Node adapter's runner (absent on the Worker, which runs none). */
  wakeRunner?: () => void;
  /** Wakes log streams when lines are stored (Node adapter); absent on the Worker, whose streams poll. */
  logFeed?: LogFeed;
  /** Wakes build servers' waiting claims when a deployment is queued (JOBS_QUEUED; Node adapter); absent on the Worker, whose claims poll. */
  jobFeed?: WakeFeed;
  /** The self-hosted edge's routes: whether it serves a project's hostname now (after reloading the project). Absent on the Worker. */
  edgeRoutes?: EdgeRoutes;
  /** Cached token lookups (Node adapter); absent on the Worker, which asks the database every time. */
  authCache?: AuthCache;
  /** Folder-upload store: presigned object storage, or the relay's disk on the Node adapter; absent when not configured. */
  uploads?: UploadStorage;
  /** Gunzip for the folder scan: zlib on Node (faster than its DecompressionStream); default DecompressionStream. */
  gunzip?: Gunzip;
  /** Git hosts and transport; default: the public hosts through the guarded fetch (private addresses refused). */
  git?: GitService;
  /** Local-folder projects (Node adapter, LOCAL_ROOTS): scan, existence, deploy snapshots. Absent on the Worker. */
  localFolders?: LocalFolders;
  /** The cloud link: forwarding of cloud projects' routes and the cloud half of the home feed. Absent on the Worker. */
  cloud?: CloudService;
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
  tags: readonly Tag[];
  /**
   * Set only for a project-pinned token (a deployment session, a log-stream token):
   * its kind and the one project it may read. The guard refuses such a caller (403)
   * on every route but the few listed for its kind in guard.ts.
   */
  session?: { kind: "deployment_session" | "log_stream"; projectId: string };
}

/** A build server calling the runner protocol with its runner token (`wsr_…`): never a user, bound to one organization. */
export interface RunnerCaller {
  serverId: string;
  orgId: string;
}

/**
 * The services only some routes use, with their defaults applied: `c.get("services").uploads`. One variable
 * rather than one each: Hono keeps a request's variables in a Map of its own, and filling a dozen more entries
 * on every request was the largest single cost the app added to one (issue 25). functions/app.ts resolves them
 * once per RequestServices object, so once per process on Node.
 */
export interface RouteServices {
  outbound: Outbound;
  mailer: Mailer | undefined;
  wakeDeliveries: () => void;
  wakeRunner: () => void;
  logFeed: LogFeed | undefined;
  jobFeed: WakeFeed | undefined;
  edgeRoutes: EdgeRoutes | undefined;
  authCache: AuthCache | undefined;
  uploads: UploadStorage | undefined;
  gunzip: Gunzip | undefined;
  git: GitService;
  localFolders: LocalFolders | undefined;
  cloud: CloudService | undefined;
  /**
   * Calls this app's own routes in-process for the request of `c` (a transfer applies a project to this instance
   * through its public API, with the caller's token). The only way to re-enter the app: it takes `c`'s bindings
   * but leaves out its Node response, on which functions/app.ts sets the outer x-request-id.
   */
  dispatch(c: Context<AppEnv>, request: Request): Promise<Response>;
}

/**
 * Read variables with `c.get("db")`, not `c.var.db`: Hono builds a fresh object of
 * every variable on each `c.var` access, a measurable cost on the hot path.
 */
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
    /** Set instead of `caller` on the runner protocol's routes (permission `runner`). */
    runner: RunnerCaller | undefined;
    /** The services only some routes use, with their defaults applied (RouteServices). */
    services: RouteServices;
  };
}

export type AppContext = Context<AppEnv>;
