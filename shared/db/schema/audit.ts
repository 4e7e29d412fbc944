/**
 * The audit log (issue 24): who (a user, a token, or the system) did what to
 * which object, when, and from which client address. Rows are appended, never
 * updated; secrets never appear in them (env var changes record names only).
 * Kept for AUDIT_RETENTION; an organization's rows go with it.
 */
import { index, jsonb, pgTable, text } from "drizzle-orm/pg-core";
import { createdAt } from "./columns";
import { organizations } from "./identity";

export const auditLog = pgTable(
  "audit_log",
  {
    /** `aud_…` (shared/ids.ts): sorts by time, so the API pages by it (newest first). */
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    /** `user`, `token` or `system`. */
    actorKind: text("actor_kind").notNull(),
    /** The user's id (for a token, its owner); null for the system. */
    actorUserId: text("actor_user_id"),
    /** The personal or runner token's id when a token acted. */
    actorTokenId: text("actor_token_id"),
    /** A dotted verb: `token.created`, `member.removed`, `env.changed`, `deployment.promoted`, … */
    action: text("action").notNull(),
    /** What it acted on: a kind (`project`, `deployment`, `domain`, …) and an id. */
    targetKind: text("target_kind").notNull(),
    targetId: text("target_id"),
    /** The client address the request came from; null for the system. */
    clientAddress: text("client_address"),
    /** Small, secret-free details (changed field names, a role, a domain name). */
    details: jsonb("details").$type<Record<string, unknown>>(),
    createdAt: createdAt(),
  },
  (t) => [index("audit_log_org_idx").on(t.orgId, t.id), index("audit_log_created_idx").on(t.createdAt)],
);
