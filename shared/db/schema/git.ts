/**
 * Git source: the push hook a project gets when auto-deploy is first turned on,
 * and one row per accepted push delivery (replay dedupe by the signed body, last-push history).
 */
import { index, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations } from "./identity";
import { deployments, projects } from "./projects";

export const PUSH_OUTCOMES = ["deploy_queued", "ignored", "stale", "ping"] as const;
export type PushOutcome = (typeof PUSH_OUTCOMES)[number];

/** One per project; kept when auto-deploy is turned off so the URL stays stable. */
export const gitPushHooks = pgTable(
  "git_push_hooks",
  {
    /** The hookId in `/api/git/hooks/:hookId`. */
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** AES-256-GCM ciphertext of the signing secret, bound to (org, git_push_hooks, secret, hook id). */
    secret: text("secret").notNull(),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("git_push_hooks_project_idx").on(t.projectId), index("git_push_hooks_org_idx").on(t.orgId)],
);

export const gitPushEvents = pgTable(
  "git_push_events",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    hookId: text("hook_id")
      .notNull()
      .references(() => gitPushHooks.id, { onDelete: "cascade" }),
    provider: text("provider", { enum: ["github", "gitlab", "gitea", "bitbucket"] }).notNull(),
    /** The provider's delivery id header, for support only: it is not signed, so nothing is keyed on it. */
    deliveryId: text("delivery_id"),
    /** `sha256:<hex>` of the signed body: a body is acted on once per project (a replay creates nothing). */
    bodyDigest: text("body_digest").notNull(),
    event: text("event").notNull(),
    ref: text("ref"),
    branch: text("branch"),
    commit: text("commit"),
    outcome: text("outcome", { enum: PUSH_OUTCOMES }).notNull(),
    /** Why a push queued nothing (`stale`: the commit is not the branch head on the host, or already deployed). */
    reason: text("reason"),
    /** The deployment a `deploy_queued` push queued (null once that deployment is gone). */
    deploymentId: text("deployment_id").references(() => deployments.id, { onDelete: "set null" }),
    receivedAt: ts("received_at").notNull().defaultNow(),
  },
  (t) => [uniqueIndex("git_push_events_body_idx").on(t.projectId, t.bodyDigest), index("git_push_events_project_idx").on(t.projectId, t.receivedAt)],
);
