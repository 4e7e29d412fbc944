/**
 * One store for build and runtime lines (request lines: request_log_batches below). Lines are ordered
 * by a per-project sequence handed out by `log_sequences`: the counter row is
 * locked by the writer until its transaction commits, so within a project lines
 * become visible in sequence order and a stream resuming after `seq` never skips
 * one committed later with a smaller number.
 *
 * No foreign keys on `log_lines`, on purpose: chatty apps write thousands of
 * lines a second (and every request through the edge was a line here until
 * migration 0032), and Postgres checks a foreign key per inserted row (a lookup and a
 * row lock on the parent): three of them tripled the database's CPU per line
 * (21 µs vs 7 µs, measured). What they gave is kept otherwise: a line is only
 * written in the transaction that takes its project's `log_sequences` row
 * (which does reference the project), and migration 0031's triggers delete a
 * project's or deployment's lines with it, as the cascades did.
 */
import { bigint, index, jsonb, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { ts } from "./columns";
import { projects } from "./projects";

/** Kinds of `log_lines`; the edge's `request` lines are stored apart, by the batch (request_log_batches below). */
export const LOG_KINDS = ["build", "runtime"] as const;
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
    /** Structured fields of a line (a runtime line's `process`, the name of the process that wrote it); null when none. */
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

/**
 * Request (server-log) lines, stored by the batch: one row per project per flush of the edge's writer
 * (functions/logs/request-batches.ts), its lines in a compact text form (functions/logs/request-lines.ts)
 * numbered `first_seq`…`last_seq` from the same per-project counter as `log_lines`. Every request through
 * the edge is a line: as one row each (a tuple, three index entries and a JSONB parse per line) the
 * database's CPU per request was a tenth of the edge's whole budget on the same cores; as a batch it is
 * one tuple and one index entry per few hundred lines.
 */
export const requestLogBatches = pgTable(
  "request_log_batches",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    firstSeq: bigint("first_seq", { mode: "number" }).notNull(),
    lastSeq: bigint("last_seq", { mode: "number" }).notNull(),
    orgId: text("org_id").notNull(),
    /** The first and last line's time: the retention by age and `since` read them without decoding the lines. */
    firstAt: ts("first_at").notNull(),
    lastAt: ts("last_at").notNull(),
    lines: text("lines").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.firstSeq] }), index("request_log_batches_last_at_idx").using("brin", t.lastAt)],
);
