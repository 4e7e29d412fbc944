/** Workspace settings: one row per (organization, user). */
import { boolean, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { ts } from "./columns";
import { organizations, users } from "./identity";

export const workspaceSettings = pgTable(
  "workspace_settings",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    buildMode: text("build_mode", { enum: ["auto", "server", "local"] })
      .notNull()
      .default("auto"),
    defaultDeployTarget: text("default_deploy_target", { enum: ["local", "server", "cloud"] }),
    defaultServerId: text("default_server_id"),
    /** AES-256-GCM ciphertext bound to (org, user); see shared/crypto/keyring.ts. */
    cloneTokenCiphertext: text("clone_token_ciphertext"),
    cloneTokenSetAt: ts("clone_token_set_at"),
    cloneTokenAsDefault: boolean("clone_token_as_default").notNull().default(false),
    cloneStrategyPreference: text("clone_strategy_preference", { enum: ["prompt", "local", "remote-with-token"] })
      .notNull()
      .default("prompt"),
    forwardGitToServer: boolean("forward_git_to_server").notNull().default(false),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.userId] })],
);
