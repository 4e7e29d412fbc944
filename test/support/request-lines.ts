/** The request (server-log) lines stored for a project, decoded from their batch rows, oldest first: what the edge tests assert on. */
import { asc, eq } from "drizzle-orm";
import { decodeRequestLines, type RequestLine } from "../../functions/logs/request-lines";
import { requestLogBatches } from "../../shared/db/schema";
import type { Executor } from "../../shared/db/types";

export type StoredRequestLine = RequestLine & { seq: number; projectId: string };

export async function storedRequestLines(db: Executor, projectId?: string): Promise<StoredRequestLine[]> {
  const q = db.select({ projectId: requestLogBatches.projectId, firstSeq: requestLogBatches.firstSeq, lines: requestLogBatches.lines }).from(requestLogBatches);
  const batches = await (projectId === undefined ? q : q.where(eq(requestLogBatches.projectId, projectId))).orderBy(
    asc(requestLogBatches.projectId),
    asc(requestLogBatches.firstSeq),
  );
  return batches.flatMap((b) => decodeRequestLines(b.lines).map((l, i) => ({ ...l, seq: b.firstSeq + i, projectId: b.projectId })));
}
