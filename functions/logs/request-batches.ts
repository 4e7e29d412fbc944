/**
 * Writing the edge's request lines: a batch row per project per call, its lines
 * in the compact text form (request-lines.ts), numbered from the project's
 * log_sequences counter in the same statement, so request lines share the
 * gap-free ordering of build and runtime lines (shared/db/schema/logs.ts).
 */
import { sql } from "drizzle-orm";
import type { Db } from "../../shared/db/types";
import { encodeRequestLine, type RequestLine } from "./request-lines";
import { byProject } from "./store";

/** A request line waiting in the writer: its project and organization, time (ms) and encoded text. */
export interface PendingRequestLine {
  projectId: string;
  orgId: string;
  at: number;
  text: string;
}

export function pendingRequestLine(projectId: string, orgId: string, line: RequestLine): PendingRequestLine {
  return { projectId, orgId, at: line.at, text: encodeRequestLine(line) };
}

/** Lines per batch row at most (the writer flushes before this; a row stays well under a megabyte). */
export const MAX_ROW_LINES = 5000;

/**
 * Stores lines (any mix of projects; each project's in the order given) and answers how many. One
 * transaction, the projects in byProject's fixed order.
 */
export async function appendRequestLines(db: Db, lines: PendingRequestLine[]): Promise<number> {
  if (lines.length === 0) return 0;
  await db.transaction(async (tx) => {
    for (const [projectId, all] of byProject(lines)) {
      for (let i = 0; i < all.length; i += MAX_ROW_LINES) {
        const rows = all.slice(i, i + MAX_ROW_LINES);
        let text = "";
        let firstAt = rows[0]!.at;
        let lastAt = firstAt;
        for (const r of rows) {
          text += r.text;
          if (r.at < firstAt) firstAt = r.at;
          if (r.at > lastAt) lastAt = r.at;
        }
        // The counter and the row in one statement: the counter row stays locked until commit (see log_sequences).
        await tx.execute(sql`
          with counter as (
            insert into log_sequences (project_id, last) values (${projectId}, ${rows.length})
            on conflict (project_id) do update set last = log_sequences.last + ${rows.length}
            returning last)
          insert into request_log_batches (project_id, first_seq, last_seq, org_id, first_at, last_at, lines)
          select ${projectId}, counter.last - ${rows.length} + 1, counter.last, ${rows[0]!.orgId},
            ${new Date(firstAt).toISOString()}::timestamptz, ${new Date(lastAt).toISOString()}::timestamptz, ${text}
          from counter`);
      }
    }
  });
  return lines.length;
}
