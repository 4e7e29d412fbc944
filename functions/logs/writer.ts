/**
 * A batching writer in front of the log store: chatty apps write thousands of
 * lines a second, and one insert per line would cap that at the database's round
 * trips. Lines wait at most FLUSH_MS (or until MAX_BATCH are queued), then go in
 * one transaction; `onAppended` is told which projects got lines (streams wake).
 * A failed flush is logged and its lines dropped: logs never stall the app.
 */
import pg from "pg";
import type { Db } from "../../shared/db/types";
import type { Logger } from "../../shared/http/logger";
import { copyLogLines } from "./copy-lines";
import { appendLogLines, type NewLogLine } from "./store";
import { countLogLines } from "../operations/metrics/process-metrics";

const FLUSH_MS = 50;
const MAX_BATCH = 5000;
/** Lines queued beyond this (the database cannot keep up) are dropped and counted, not buffered without bound. */
const MAX_QUEUED = 100_000;

export interface LogWriter {
  write(line: NewLogLine): void;
  /** Writes everything queued so far; resolves when it is stored. */
  flush(): Promise<void>;
  /** Lines dropped because the queue was full or a flush failed. */
  readonly dropped: number;
}

/** On node-postgres the lines go in with COPY (copy-lines.ts: a third of Postgres' CPU per line less); on PGlite through store.ts's INSERT. */
function appenderFor(db: Db): (lines: NewLogLine[]) => Promise<number> {
  const client = (db as unknown as { $client?: unknown }).$client;
  if (client instanceof pg.Pool) return (lines) => copyLogLines(client, lines);
  return (lines) => appendLogLines(db, lines);
}

export function createLogWriter(deps: { db: Db; logger: Logger; onAppended?: (projectIds: string[]) => void }): LogWriter {
  const append = appenderFor(deps.db);
  let queue: NewLogLine[] = [];
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
        const byProject = new Map<string, NewLogLine[]>();
        for (const l of batch) {
          const list = byProject.get(l.projectId);
          if (list) list.push(l);
          else byProject.set(l.projectId, [l]);
        }
        if (byProject.size === 1) {
          dropped += batch.length;
          countLogLines("dropped", batch.length);
          deps.logger.error("log_append_failed", { lines: batch.length, error: (error as Error).message });
          return;
        }
        for (const [projectId, lines] of byProject) {
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
