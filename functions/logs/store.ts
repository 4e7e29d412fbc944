/**
 * The log store: build, runtime and request lines of every project, in one table.
 * Writers append batches; each batch takes its numbers from the project's counter
 * row in the same transaction (see shared/db/schema/logs.ts for why that keeps
 * streams gap-free). Lines over MAX_LINE_CHARS are cut with a marker.
 */
import { sql } from "drizzle-orm";
import { type LOG_KINDS, type LOG_STREAMS, logLines, logSequences } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";

export type LogKind = (typeof LOG_KINDS)[number];
export type LogStream = (typeof LOG_STREAMS)[number];

/** 16 KiB: a longer line is cut to this many characters followed by TRUNCATED_MARKER. */
export const MAX_LINE_CHARS = 16 * 1024;
export const TRUNCATED_MARKER = " … [line truncated]";

export interface NewLogLine {
  orgId: string;
  projectId: string;
  deploymentId: string | null;
  kind: LogKind;
  stream: LogStream;
  at: Date;
  message: string;
  fields?: Record<string, unknown> | null;
}

/** Cuts a message over the line limit (ANSI escapes and every other byte kept as sent). */
export function capLine(message: string): string {
  return message.length > MAX_LINE_CHARS ? message.slice(0, MAX_LINE_CHARS) + TRUNCATED_MARKER : message;
}

/**
 * Appends lines (any mix of projects) and returns how many were written. One
 * transaction per call: callers batch (the runner flushes every few milliseconds).
 */
export async function appendLogLines(db: Db, lines: NewLogLine[]): Promise<number> {
  if (lines.length === 0) return 0;
  const byProject = new Map<string, NewLogLine[]>();
  for (const line of lines) {
    const list = byProject.get(line.projectId);
    if (list) list.push(line);
    else byProject.set(line.projectId, [line]);
  }
  // Projects in a fixed order: two writers of the same projects never wait on each other in a cycle.
  const projectIds = [...byProject.keys()].sort();
  await db.transaction(async (tx) => {
    for (const projectId of projectIds) {
      const batch = byProject.get(projectId)!;
      const [counter] = await tx
        .insert(logSequences)
        .values({ projectId, last: batch.length })
        .onConflictDoUpdate({ target: logSequences.projectId, set: { last: sql`${logSequences.last} + ${batch.length}` } })
        .returning({ last: logSequences.last });
      const first = counter!.last - batch.length + 1;
      // Chunks keep each statement's parameter count well under Postgres's 65,535.
      for (let i = 0; i < batch.length; i += 1000) {
        await tx.insert(logLines).values(
          batch.slice(i, i + 1000).map((l, j) => ({
            projectId,
            seq: first + i + j,
            orgId: l.orgId,
            deploymentId: l.deploymentId,
            kind: l.kind,
            stream: l.stream,
            at: l.at,
            message: capLine(l.message),
            fields: l.fields ?? null,
          })),
        );
      }
    }
  });
  return lines.length;
}
