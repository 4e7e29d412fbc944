/** Organizations, users, memberships, personal access tokens, invitations. */
import { sql } from "drizzle-orm";
import { index, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";

/** Kinds of api_tokens rows; all but `personal` are pinned to one project. */
export const TOKEN_KINDS = ["personal", "deployment_session", "log_stream"] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

export const organizations = pgTable("organizations", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  createdAt: createdAt(),
});

export const users = pgTable(
  "users",
  {
    id: text("id").primaryKey(),
    email: text("email").notNull(),
    name: text("name").notNull(),
    /** The organization used when a request names none (`X-Organization-Id`). */
    defaultOrgId: text("default_org_id").references(() => organizations.id, { onDelete: "set null" }),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("users_email_lower_idx").on(sql`lower(${t.email})`)],
);

export const memberships = pgTable(
  "memberships",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text("role", { enum: ["owner", "admin", "member", "viewer"] }).notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.userId] }), index("memberships_user_idx").on(t.userId)],
);

export const apiTokens = pgTable(
  "api_tokens",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** SHA-256 of the token; the token itself is shown once and never stored. */
    tokenHash: text("token_hash").notNull(),
    /** First characters of the token, so a user can tell tokens apart in a list. */
    displayPrefix: text("display_prefix").notNull(),
    /** null = every tag the user's role grants; otherwise the intersection. */
    scopes: text("scopes").array(),
    expiresAt: ts("expires_at"),
    revokedAt: ts("revoked_at"),
    /**
     * `deployment_session`: a short-lived read-only token pinned to one project
     * (`project_id`, in `org_id`), accepted only by the routes listed in shared/http/guard.ts.
     * `log_stream`: the same, for one route only (the project's server-log stream), 60 s to connect.
     */
    kind: text("kind", { enum: TOKEN_KINDS }).notNull().default("personal"),
    projectId: text("project_id"),
    orgId: text("org_id").references(() => organizations.id, { onDelete: "cascade" }),
    /**
     * The token or cookie session that minted this one (deployment-session and log-stream tokens; null
     * for personal tokens): a stream opened with it ends when the parent is revoked, expires or logs out.
     */
    parentId: text("parent_id"),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("api_tokens_hash_idx").on(t.tokenHash), index("api_tokens_user_idx").on(t.userId), index("api_tokens_project_idx").on(t.projectId)],
);

export const invitations = pgTable(
  "invitations",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    email: text("email").notNull(),
    role: text("role", { enum: ["owner", "admin", "member", "viewer"] }).notNull(),
    /** SHA-256 of the invitation code; the code is returned once to the inviter. */
    codeHash: text("code_hash").notNull(),
    invitedBy: text("invited_by").references(() => users.id, { onDelete: "set null" }),
    expiresAt: ts("expires_at").notNull(),
    acceptedAt: ts("accepted_at"),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("invitations_code_idx").on(t.codeHash), index("invitations_org_idx").on(t.orgId)],
);
