/**
 * Batching writers in front of the log stores: chatty apps write thousands of
 * lines a second, and every request through the edge is a line; one insert per
 * line would cap that at the database's round trips. Lines wait at most FLUSH_MS
 * (or until MAX_BATCH are queued), then go in one transaction; `onAppended` is
 * told which projects got lines (streams wake). A failed flush is logged and its
 * lines dropped: logs never stall the app.
 *
 * Two writers share this: build and runtime lines (createLogWriter, into
 * log_lines) and the edge's request lines (createRequestLogWriter, a batch row per
 * project and flush in request_log_batches: request-batches.ts).
 */
import pg from "pg";
import type { Db } from "../../shared/db/types";
import type { Logger } from "../../shared/http/logger";
import { countLogLines } from "../operations/metrics/process-metrics";
import { copyLogLines } from "./copy-lines";
import { appendRequestLines, type PendingRequestLine } from "./request-batches";
import { appendLogLines, byProject, type NewLogLine } from "./store";

const FLUSH_MS = 50;
const MAX_BATCH = 5000;
/** Lines queued beyond this (the database cannot keep up) are dropped and counted, not buffered without bound. */
const MAX_QUEUED = 100_000;

export interface BatchWriter<T> {
  write(line: T): void;
  /** Writes everything queued so far; resolves when it is stored. */
  flush(): Promise<void>;
  /** Lines dropped because the queue was full or a flush failed. */
  readonly dropped: number;
}

export type LogWriter = BatchWriter<NewLogLine>;
export type RequestLogWriter = BatchWriter<PendingRequestLine>;

interface WriterDeps {
  logger: Logger;
  onAppended?: (projectIds: string[]) => void;
}

/** A batching writer over `append` (one transaction for any mix of projects; each project's lines in order). */
function createBatchWriter<T extends { projectId: string }>(append: (lines: T[]) => Promise<unknown>, deps: WriterDeps): BatchWriter<T> {
  let queue: T[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  let dropped = 0;

  const flushNow = (): Promise<void> => {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    const batch = queue;
    queue = [];
    // Counted per batch rather than per write (a labelled counter's increment is a hash of its labels: per
    // request line on the edge, that was measurable); every queued line is in exactly one batch.
    countLogLines("ingested", batch.length);
    // Batches are written one after another, so a project's lines keep their order.
    inFlight = inFlight.then(async () => {
      if (batch.length === 0) return;
      try {
        await append(batch);
        deps.onAppended?.([...new Set(batch.map((l) => l.projectId))]);
      } catch (error) {
        // One project's lines can fail alone (it was just deleted: its log_sequences row cannot be taken): retry
        // project by project so the others' lines are kept.
        const groups = byProject(batch);
        if (groups.length === 1) {
          dropped += batch.length;
          countLogLines("dropped", batch.length);
          deps.logger.error("log_append_failed", { lines: batch.length, error: (error as Error).message });
          return;
        }
        for (const [projectId, lines] of groups) {
          try {
            await append(lines);
            deps.onAppended?.([projectId]);
          } catch (e) {
            dropped += lines.length;
            countLogLines("dropped", lines.length);
            deps.logger.error("log_append_failed", { projectId, lines: lines.length, error: (e as Error).message });
          }
        }
      }
    });
    return inFlight;
  };

  return {
    write(line) {
      if (queue.length >= MAX_QUEUED) {
        dropped++;
        countLogLines("dropped");
        return;
      }
      queue.push(line);
      if (queue.length >= MAX_BATCH) void flushNow();
      else timer ??= setTimeout(() => void flushNow(), FLUSH_MS);
    },
    flush: flushNow,
    get dropped() {
      return dropped;
    },
  };
}

/** On node-postgres the lines go in with COPY (copy-lines.ts: a third of Postgres' CPU per line less); on PGlite through store.ts's INSERT. */
function appenderFor(db: Db): (lines: NewLogLine[]) => Promise<number> {
  const client = (db as unknown as { $client?: unknown }).$client;
  if (client instanceof pg.Pool) return (lines) => copyLogLines(client, lines);
  return (lines) => appendLogLines(db, lines);
}

/** Build and runtime lines, into log_lines. */
export function createLogWriter(deps: WriterDeps & { db: Db }): LogWriter {
  return createBatchWriter(appenderFor(deps.db), deps);
}

/** The edge's request lines: a batch row per project and flush (request-batches.ts). */
export function createRequestLogWriter(deps: WriterDeps & { db: Db }): RequestLogWriter {
  return createBatchWriter((lines) => appendRequestLines(deps.db, lines), deps);
}
