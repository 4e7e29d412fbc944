/**
 * Self-hosted ↔ cloud: an organization's link to a cloud organization, the cloud
 * projects this instance knows of (so per-project routes recognise their ids
 * without asking the cloud), and transfers in progress (so an interrupted one
 * resumes without duplicates).
 */
import { pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations, users } from "./identity";

export const TRANSFER_DIRECTIONS = ["to-cloud", "to-self-hosted"] as const;
export const TRANSFER_STATES = ["running", "failed", "done"] as const;

/** One link per organization of this instance: the cloud API and a personal access token of the cloud. */
export const cloudLinks = pgTable("cloud_links", {
  orgId: text("org_id")
    .primaryKey()
    .references(() => organizations.id, { onDelete: "cascade" }),
  apiUrl: text("api_url").notNull(),
  /** AES-256-GCM ciphertext bound to (org, cloud_links, token, org id). */
  tokenCiphertext: text("token_ciphertext").notNull(),
  /** The token's last four characters, to tell links apart without revealing it. */
  tokenHint: text("token_hint").notNull(),
  cloudOrgId: text("cloud_org_id").notNull(),
  cloudOrgName: text("cloud_org_name").notNull(),
  /** Set by CLOUD_API_URL/CLOUD_TOKEN at start (the environment then owns the link); null: linked through the API. */
  fromEnvironment: text("from_environment"),
  linkedBy: text("linked_by").references(() => users.id, { onDelete: "set null" }),
  createdAt: createdAt(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});

/**
 * A cloud project this instance has seen (in the home feed or by a transfer).
 * Per-project routes called with its id are forwarded to the cloud; `returnedAt`
 * marks one brought back here (its calls then stay local). Keyed per organization:
 * two organizations of the instance may link to the same cloud organization.
 */
export const cloudProjects = pgTable(
  "cloud_projects",
  {
    id: text("id").notNull(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** The local project it was transferred from or brought back into, if any. */
    localProjectId: text("local_project_id"),
    returnedAt: ts("returned_at"),
    seenAt: ts("seen_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.id] })],
);

/** The last transfer of a project in one direction: its step, so a run again resumes (all steps are idempotent). */
export const projectTransfers = pgTable(
  "project_transfers",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    direction: text("direction", { enum: TRANSFER_DIRECTIONS }).notNull(),
    /** The project transferred: a local id (to-cloud) or a cloud id (to-self-hosted). */
    sourceId: text("source_id").notNull(),
    /** The project created on the other side, once created. */
    targetId: text("target_id"),
    step: text("step").notNull(),
    state: text("state", { enum: TRANSFER_STATES }).notNull(),
    error: text("error"),
    /** The run holding the transfer, set at each claim: every bookkeeping write of a run is conditioned on it, so a run taken over writes nothing more. */
    runId: text("run_id"),
    startedAt: ts("started_at").notNull().defaultNow(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [uniqueIndex("project_transfers_source_idx").on(t.orgId, t.direction, t.sourceId)],
);
