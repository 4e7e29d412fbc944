/**
 * Git identity forwarding (issue 22, `forwardGitToServer`): the local git
 * credential `wsp deploy` hands to its deployment, held only for the job: one
 * row per deployment, encrypted with the keyring (bound to the deployment id),
 * deleted when the clone ends or the job finishes, and never after
 * `expires_at` (the lease it was given for).
 */
import { pgTable, text } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations } from "./identity";
import { deployments } from "./projects";

export const jobCredentials = pgTable("job_credentials", {
  deploymentId: text("deployment_id")
    .primaryKey()
    .references(() => deployments.id, { onDelete: "cascade" }),
  orgId: text("org_id")
    .notNull()
    .references(() => organizations.id, { onDelete: "cascade" }),
  /** AES-256-GCM ciphertext of `{username, password}`, bound to (org, job_credentials, credential, deployment id). */
  credentialCiphertext: text("credential_ciphertext").notNull(),
  expiresAt: ts("expires_at").notNull(),
  createdAt: createdAt(),
});
