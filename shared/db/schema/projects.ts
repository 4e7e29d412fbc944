/** Projects: configuration, environments, env vars, resources, domains, deployments. */
import { sql } from "drizzle-orm";
import { bigint, boolean, check, doublePrecision, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations, users } from "./identity";

/** Build/deploy options (POST /api/projects/:id/options); absent keys mean "detected at build time". */
export interface ProjectOptions {
  rootDirectory?: string;
  installCommand?: string;
  buildCommand?: string;
  startCommand?: string;
  outputDirectory?: string;
  runtimeVersion?: string;
  /** Where the runner's health check asks (a 2xx or 3xx answer needed); unset: any answer to `/`. */
  healthCheckPath?: string;
}

/**
 * What a deployment pins besides its source and variables (functions/deployments/config-snapshot.ts):
 * the project's resources and options as they were when it was queued, and a digest of the
 * environment's variables as stored then, compared with the live one's (needsRedeploy).
 */
export interface ConfigSnapshot {
  resources: { productionCpuCores: number; productionMemoryMb: number; buildCpuCores: number; buildMemoryMb: number; diskGb: number; port: number };
  options: ProjectOptions;
  variablesDigest: string;
}

export const GIT_PROVIDERS = ["github", "gitlab", "bitbucket", "gitea", "upload"] as const;
export const ROUTING_STATES = ["pending", "synced", "offline"] as const;
export const SLEEP_MODES = ["auto_sleep", "always_on"] as const;
export const ENVIRONMENT_KINDS = ["production", "preview"] as const;
export const DEPLOYMENT_STATUSES = ["queued", "building", "deploying", "ready", "failed", "canceled"] as const;

export const projects = pgTable(
  "projects",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** The free route's label (`<slug>.<shared domain>`): fixed at creation, unique across the deployment. */
    slug: text("slug").notNull(),
    framework: text("framework").notNull().default("auto"),
    gitProvider: text("git_provider", { enum: GIT_PROVIDERS }),
    gitOwner: text("git_owner"),
    gitRepo: text("git_repo"),
    gitBranch: text("git_branch"),
    options: jsonb("options").$type<ProjectOptions>().notNull().default({}),
    productionCpuCores: doublePrecision("production_cpu_cores").notNull().default(1),
    productionMemoryMb: integer("production_memory_mb").notNull().default(512),
    buildCpuCores: doublePrecision("build_cpu_cores").notNull().default(2),
    buildMemoryMb: integer("build_memory_mb").notNull().default(2048),
    diskGb: integer("disk_gb").notNull().default(10),
    sleepMode: text("sleep_mode", { enum: SLEEP_MODES }).notNull().default("auto_sleep"),
    port: integer("port").notNull().default(3000),
    /** AES-256-GCM ciphertext bound to (org, projects, clone_token, project id). */
    cloneTokenCiphertext: text("clone_token_ciphertext"),
    cloneTokenSetAt: ts("clone_token_set_at"),
    /** Self-hosted local-folder projects: the folder (under a LOCAL_ROOTS root, resolved) deployments snapshot. */
    localPath: text("local_path"),
    /** Set when the project was transferred to the cloud: the cloud project's id. The row stays (deploy history and logs stay here), hidden and disabled; its per-project routes forward to the cloud. */
    movedToCloud: text("moved_to_cloud"),
    /** Set while the project is disabled (deploys paused, routes offline). */
    disabledAt: ts("disabled_at"),
    routingState: text("routing_state", { enum: ROUTING_STATES }).notNull().default("pending"),
    /** The free-route hostname last synced (the shared domain is configuration and may change). */
    routingHost: text("routing_host"),
    routingLastAttemptAt: ts("routing_last_attempt_at"),
    routingSyncedAt: ts("routing_synced_at"),
    /** The remote's default branch (its HEAD) as last seen by POST :id/git/link. */
    gitDefaultBranch: text("git_default_branch"),
    /** Set by POST :id/git/link (checked on the host); PATCH gitOwner/gitRepo leaves it alone. */
    gitLinkedAt: ts("git_linked_at"),
    autoDeploy: boolean("auto_deploy").notNull().default(false),
    /** The public hostname git hosts reach this instance at; null: the default (PUBLIC_URL's host, else the request's). */
    webhookDomain: text("webhook_domain"),
    lastPushCommit: text("last_push_commit"),
    lastPushBranch: text("last_push_branch"),
    lastPushAt: ts("last_push_at"),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [uniqueIndex("projects_slug_idx").on(t.slug), index("projects_org_idx").on(t.orgId, t.id)],
);

export const environments = pgTable(
  "environments",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    kind: text("kind", { enum: ENVIRONMENT_KINDS }).notNull(),
    branch: text("branch"),
    /** After its current app is given up (a crash loop), promote the previous ready deployment; null: on for production, off for previews. */
    autoRollback: boolean("auto_rollback"),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("environments_project_name_idx").on(t.projectId, t.name),
    uniqueIndex("environments_one_production_idx").on(t.projectId).where(sql`${t.kind} = 'production'`),
  ],
);

/** One row per (project, environment, key); a secret's value lives only as ciphertext. */
export const envVars = pgTable(
  "env_vars",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    environmentId: text("environment_id")
      .notNull()
      .references(() => environments.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    value: text("value"),
    /** AES-256-GCM ciphertext bound to (org, env_vars, value, `<project>/<environment>/<key>`). */
    valueCiphertext: text("value_ciphertext"),
    isSecret: boolean("is_secret").notNull(),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.environmentId, t.key] }),
    check(
      "env_vars_value_kind",
      sql`(${t.isSecret} and ${t.value} is null and ${t.valueCiphertext} is not null) or (not ${t.isSecret} and ${t.value} is not null and ${t.valueCiphertext} is null)`,
    ),
  ],
);

/** Custom domains; a hostname belongs to one project across the deployment. */
export const domains = pgTable(
  "domains",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    hostname: text("hostname").notNull(),
    isPrimary: boolean("is_primary").notNull().default(false),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("domains_hostname_idx").on(t.hostname),
    index("domains_project_idx").on(t.projectId),
    uniqueIndex("domains_one_primary_idx").on(t.projectId).where(sql`${t.isPrimary}`),
  ],
);

export const DEPLOYMENT_SOURCES = ["git", "upload", "local"] as const;
/** Where a deployment builds and runs (functions/deployments/placement.ts): this instance's in-process runner, or a build server. */
export const PLACEMENTS = ["local", "server"] as const;

/**
 * One attempt to run one environment of one project from one pinned source
 * (shared/design/DEPLOY.md). The table is also the runner's queue: a runner
 * claims a `queued` row and holds `lease_expires_at` while it works.
 */
export const deployments = pgTable(
  "deployments",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    environmentId: text("environment_id")
      .notNull()
      .references(() => environments.id, { onDelete: "cascade" }),
    status: text("status", { enum: DEPLOYMENT_STATUSES }).notNull().default("queued"),
    /** Rows written before sources were recorded were git deployments. */
    source: text("source", { enum: DEPLOYMENT_SOURCES }).notNull().default("git"),
    gitProvider: text("git_provider"),
    gitOwner: text("git_owner"),
    gitRepo: text("git_repo"),
    branch: text("branch"),
    commitSha: text("commit_sha"),
    /**
     * Upload and local: the tarball's key in the upload store, and the session it came from. The key is
     * cleared once the artifact is removed (the deployment failed, was canceled or pruned: functions/deployments/artifacts.ts).
     */
    artifactKey: text("artifact_key"),
    uploadSessionId: text("upload_session_id"),
    /** The artifact's size in bytes, recorded when it was stored; counted against the organization's artifact cap while `artifact_key` is set. */
    artifactBytes: bigint("artifact_bytes", { mode: "number" }),
    /** Self-hosted: the size in bytes of the runner's kept work directory (measured once ready); counted against the work-directory cap while ready and not pruned. */
    workDirBytes: bigint("work_dir_bytes", { mode: "number" }),
    /** The one ready deployment of its environment that serves (deployments_one_current_idx). */
    current: boolean("current").notNull().default(false),
    failureReason: text("failure_reason"),
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    /** The runner holding the job and until when (renewed while it works; past it the job is claimable again). */
    claimedBy: text("claimed_by"),
    leaseExpiresAt: ts("lease_expires_at"),
    /** Compose services deployed with it (upload: the ensure's or the scan's), values not included. */
    services: jsonb("services").$type<Record<string, ServiceSpec>>(),
    /** Their environment values: AES-256-GCM bound to (org, deployments, services, deployment id). */
    servicesCiphertext: text("services_ciphertext"),
    /** The resources, options and variables digest it runs with, pinned when queued; null: queued before deployments pinned them (the runner reads the live configuration). */
    configSnapshot: jsonb("config_snapshot").$type<ConfigSnapshot>(),
    /** The environment's variables when queued, secrets included: one AES-256-GCM ciphertext bound to (org, deployments, env_snapshot, deployment id). */
    envSnapshotCiphertext: text("env_snapshot_ciphertext"),
    /** Where the running app listens (self-hosted): the runner process that serves it and its port. */
    servedBy: text("served_by"),
    port: integer("port"),
    /** Set when the app crashed more often than the restart policy allows; it no longer serves. */
    crashedAt: ts("crashed_at"),
    /** Set when the runner removed its kept build (beyond the newest superseded ones): it can no longer be promoted. */
    prunedAt: ts("pruned_at"),
    /** Sleep mode (auto_sleep): set while the app is stopped for being idle; the next request clears it and the runner starts it. */
    asleepAt: ts("asleep_at"),
    /** The last request an edge passed to it (written at most every few seconds per process): what idleness is measured from. */
    lastRequestAt: ts("last_request_at"),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
    finishedAt: ts("finished_at"),
    /**
     * Placement, resolved when queued (functions/deployments/placement.ts). Rows queued before placement
     * existed are `local`: the in-process runner that took every job before still takes them.
     */
    placement: text("placement", { enum: PLACEMENTS }).notNull().default("local"),
    /** `server`: the one server it must run on (per deploy, else the Settings default); null: any eligible server. Not a foreign key: a deleted server still explains why the deployment waits. */
    serverId: text("server_id"),
    /** `server` without a required server: labels an eligible server must all carry. */
    serverLabels: text("server_labels").array().notNull().default(sql`'{}'::text[]`),
    /** Why it waits in the queue as last computed (when queued; reads recompute it): a WAITING_REASONS code, null when a runner can take it. */
    waitingFor: text("waiting_for"),
    /** The highest log sequence a build server's runner sent for it (runner protocol): a retried batch stores only lines above it, once. */
    runnerLogSeq: bigint("runner_log_seq", { mode: "number" }).notNull().default(0),
  },
  (t) => [
    index("deployments_project_idx").on(t.projectId, t.id),
    uniqueIndex("deployments_one_current_idx").on(t.environmentId).where(sql`${t.current}`),
    index("deployments_queue_idx").on(t.id).where(sql`${t.status} = 'queued'`),
    /** The organization's stored bytes (the quota check's sum) read only rows that hold some. */
    index("deployments_org_storage_idx").on(t.orgId).where(sql`${t.artifactKey} is not null or ${t.workDirBytes} is not null`),
    check("deployments_current_ready", sql`not ${t.current} or ${t.status} = 'ready'`),
    check("deployments_snapshot_whole", sql`(${t.configSnapshot} is null) = (${t.envSnapshotCiphertext} is null)`),
  ],
);

/** Every status a deployment went through, with its time (the creation's `queued` included). */
export const deploymentTransitions = pgTable(
  "deployment_transitions",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    deploymentId: text("deployment_id")
      .notNull()
      .references(() => deployments.id, { onDelete: "cascade" }),
    status: text("status", { enum: DEPLOYMENT_STATUSES }).notNull(),
    at: ts("at").notNull().defaultNow(),
  },
  (t) => [index("deployment_transitions_deployment_idx").on(t.deploymentId, t.at)],
);

export const UPLOAD_TARGETS = ["relay", "presigned"] as const;

/**
 * Folder-upload sessions: one gzipped tarball each, stored under the organization's
 * prefix of the upload store (`<orgId>/<sessionId>.tar.gz`). Expired rows and their
 * objects are removed by the upload sweeper.
 */
export const uploadSessions = pgTable(
  "upload_sessions",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    target: text("target", { enum: UPLOAD_TARGETS }).notNull(),
    objectKey: text("object_key").notNull(),
    hintName: text("hint_name"),
    hintSizeBytes: integer("hint_size_bytes"),
    /** Set when the relay stored the tarball (a presigned upload is discovered by the scan). */
    uploadedAt: ts("uploaded_at"),
    sizeBytes: integer("size_bytes"),
    /** The last scan's result as read (compose values masked). */
    scan: jsonb("scan").$type<Record<string, unknown>>(),
    /** The compose environment values the scan captured: AES-256-GCM bound to (org, upload_sessions, services, session id). */
    servicesCiphertext: text("services_ciphertext"),
    scannedAt: ts("scanned_at"),
    /** The project an ensure used this upload for. */
    projectId: text("project_id").references(() => projects.id, { onDelete: "set null" }),
    expiresAt: ts("expires_at").notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    index("upload_sessions_org_idx").on(t.orgId, t.id),
    index("upload_sessions_expiry_idx").on(t.expiresAt),
    index("upload_sessions_project_idx").on(t.projectId),
  ],
);

/** A compose service's configuration apart from its environment. */
export interface ServiceSpec {
  image: string | null;
  build: { context: string; dockerfile: string | null } | null;
  command: string | null;
  ports: string[];
  dependsOn: string[];
}

/** The project's service set (multi-service folders), written only by ensure as a whole. */
export const projectServices = pgTable(
  "project_services",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    position: integer("position").notNull(),
    spec: jsonb("spec").$type<ServiceSpec>().notNull(),
    /** Environment keys in order; their values live only in envCiphertext. */
    envKeys: jsonb("env_keys").$type<string[]>().notNull().default([]),
    /** AES-256-GCM of the JSON values, bound to (org, project_services, environment, `<project>/<service>`). */
    envCiphertext: text("env_ciphertext"),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name] })],
);
