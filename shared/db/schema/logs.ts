/**
 * One store for build, runtime and request (server-log) lines. Lines are ordered
 * by a per-project sequence handed out by `log_sequences`: the counter row is
 * locked by the writer until its transaction commits, so within a project lines
 * become visible in sequence order and a stream resuming after `seq` never skips
 * one committed later with a smaller number.
 *
 * No foreign keys on `log_lines`, on purpose: every request through the edge is
 * a line, and Postgres checks a foreign key per inserted row (a lookup and a
 * row lock on the parent): three of them tripled the database's CPU per line
 * (21 µs vs 7 µs, measured). What they gave is kept otherwise: a line is only
 * written in the transaction that takes its project's `log_sequences` row
 * (which does reference the project), and migration 0031's triggers delete a
 * project's or deployment's lines with it, as the cascades did.
 */
import { bigint, index, jsonb, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { ts } from "./columns";
import { projects } from "./projects";

export const LOG_KINDS = ["build", "runtime", "request"] as const;
/** `system`: lines the runner itself writes (step headers, exit codes, health checks). */
export const LOG_STREAMS = ["stdout", "stderr", "system"] as const;

export const logLines = pgTable(
  "log_lines",
  {
    projectId: text("project_id").notNull(),
    seq: bigint("seq", { mode: "number" }).notNull(),
    orgId: text("org_id").notNull(),
    deploymentId: text("deployment_id"),
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
    // BRIN: lines are appended in time order, so block ranges summarize `at` well; it costs next to nothing per insert (a B-tree on `at` was a fourth index written per line).
    index("log_lines_at_idx").using("brin", t.at),
  ],
);

/** The last sequence number handed out per project. */
export const logSequences = pgTable("log_sequences", {
  projectId: text("project_id")
    .primaryKey()
    .references(() => projects.id, { onDelete: "cascade" }),
  last: bigint("last", { mode: "number" }).notNull(),
});
