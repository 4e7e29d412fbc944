/**
 * One store for build, runtime and request (server-log) lines. Lines are ordered
 * by a per-project sequence handed out by `log_sequences`: the counter row is
 * locked by the writer until its transaction commits, so within a project lines
 * become visible in sequence order and a stream resuming after `seq` never skips
 * one committed later with a smaller number.
 */
import { bigint, index, jsonb, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { ts } from "./columns";
import { organizations } from "./identity";
import { deployments, projects } from "./projects";

export const LOG_KINDS = ["build", "runtime", "request"] as const;
/** `system`: lines the runner itself writes (step headers, exit codes, health checks). */
export const LOG_STREAMS = ["stdout", "stderr", "system"] as const;

export const logLines = pgTable(
  "log_lines",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    seq: bigint("seq", { mode: "number" }).notNull(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    deploymentId: text("deployment_id").references(() => deployments.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: LOG_KINDS }).notNull(),
    stream: text("stream", { enum: LOG_STREAMS }).notNull(),
    at: ts("at").notNull(),
    message: text("message").notNull(),
    /** Structured fields of a `request` line (method, host, path, status, …); null for build and runtime lines. */
    fields: jsonb("fields").$type<Record<string, unknown>>(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.seq] }),
    index("log_lines_deployment_idx").on(t.deploymentId, t.kind, t.seq),
    index("log_lines_project_kind_idx").on(t.projectId, t.kind, t.seq),
    index("log_lines_at_idx").on(t.at),
  ],
);

/** The last sequence number handed out per project. */
export const logSequences = pgTable("log_sequences", {
  projectId: text("project_id")
    .primaryKey()
    .references(() => projects.id, { onDelete: "cascade" }),
  last: bigint("last", { mode: "number" }).notNull(),
});
