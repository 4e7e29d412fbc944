/**
 * The log store: build and runtime lines of every project, in one table (request lines:
 * request-batches.ts).
 * Writers append batches; each batch takes its numbers from the project's counter
 * row in the same transaction (see shared/db/schema/logs.ts for why that keeps
 * streams gap-free). Lines over MAX_LINE_CHARS are cut with a marker.
 */
import { and, asc, desc, eq, gt, gte, inArray, lt, lte, min, type SQL, sql } from "drizzle-orm";
import { deployments, type LOG_KINDS, type LOG_STREAMS, logLines, logSequences } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";

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

/**
 * Cuts a message over the line limit (ANSI escapes and every other byte kept as sent, except NUL: Postgres text
 * cannot hold it, and one such line would fail its whole batch; it becomes U+FFFD, as an invalid byte does).
 */
export function capLine(message: string): string {
  const cut = message.length > MAX_LINE_CHARS ? message.slice(0, MAX_LINE_CHARS) + TRUNCATED_MARKER : message;
  return cut.includes("\0") ? cut.replaceAll("\0", "\uFFFD") : cut;
}

/**
 * Lines grouped by project, each group in the order given, the projects in a fixed (sorted) order: every
 * writer takes the projects' counter rows in that order, so two writers of the same projects never wait
 * on each other in a cycle.
 */
export function byProject<T extends { projectId: string }>(lines: readonly T[]): Array<[projectId: string, lines: T[]]> {
  const groups = new Map<string, T[]>();
  for (const line of lines) {
    const list = groups.get(line.projectId);
    if (list) list.push(line);
    else groups.set(line.projectId, [line]);
  }
  return [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Lines per INSERT statement. */
const APPEND_CHUNK = 2000;

/**
 * Appends lines (any mix of projects) and returns how many were written. One
 * transaction per call: callers batch (the runner flushes every few milliseconds).
 */
export async function appendLogLines(db: Db, lines: NewLogLine[]): Promise<number> {
  if (lines.length === 0) return 0;
  await db.transaction(async (tx) => {
    for (const [projectId, batch] of byProject(lines)) {
      const [counter] = await tx
        .insert(logSequences)
        .values({ projectId, last: batch.length })
        .onConflictDoUpdate({ target: logSequences.projectId, set: { last: sql`${logSequences.last} + ${batch.length}` } })
        .returning({ last: logSequences.last });
      const first = counter!.last - batch.length + 1;
      // One INSERT … SELECT FROM json_to_recordset(one parameter) per chunk: the lines go as one JSON text
      // (JSON.stringify is native; the driver's escaping of seven array parameters element by element cost
      // several times more on the writer's event loop, which is the edge's too), and the statement stays small.
      for (let i = 0; i < batch.length; i += APPEND_CHUNK) {
        const rows = batch.slice(i, i + APPEND_CHUNK).map((l) => ({
          o: l.orgId,
          d: l.deploymentId,
          k: l.kind,
          s: l.stream,
          a: l.at.toISOString(),
          m: capLine(l.message),
          f: l.fields ?? null,
        }));
        await tx.execute(sql`insert into log_lines (project_id, seq, org_id, deployment_id, kind, stream, at, message, fields)
          select ${projectId}, ${first + i - 1} + t.ord, t.o, t.d, t.k, t.s, t.a, t.m, t.f
          from rows from (json_to_recordset(${JSON.stringify(rows)}::json)
            as (o text, d text, k text, s text, a timestamptz, m text, f jsonb)) with ordinality as t(o, d, k, s, a, m, f, ord)`);
      }
    }
  });
  return lines.length;
}

export type LogLineRow = Pick<typeof logLines.$inferSelect, "seq" | "at" | "deploymentId" | "stream" | "message">;

const lineColumns = { seq: logLines.seq, at: logLines.at, deploymentId: logLines.deploymentId, stream: logLines.stream, message: logLines.message };

/** Build lines of one deployment after `afterSeq`, oldest first (the caller checked the deployment is the organization's). */
export async function readBuildLines(ex: Executor, orgId: string, deploymentId: string, afterSeq: number, limit: number): Promise<LogLineRow[]> {
  return ex
    .select(lineColumns)
    .from(logLines)
    .where(and(eq(logLines.deploymentId, deploymentId), eq(logLines.kind, "build"), gt(logLines.seq, afterSeq), eq(logLines.orgId, orgId)))
    .orderBy(asc(logLines.seq))
    .limit(limit);
}

/** Filters of the runtime-log reads; every one narrows. */
export interface RuntimeFilter {
  deploymentId?: string;
  environmentId?: string;
  /** Inclusive. */
  since?: Date;
  /** Exclusive. */
  until?: Date;
  stream?: LogStream;
  /** Case-insensitive substring: Postgres's position() over lower(), linear in the line's length. */
  q?: string;
}

function runtimeWhere(ex: Executor, orgId: string, projectId: string, f: RuntimeFilter): SQL[] {
  const where: SQL[] = [eq(logLines.projectId, projectId), eq(logLines.kind, "runtime"), eq(logLines.orgId, orgId)];
  if (f.deploymentId !== undefined) where.push(eq(logLines.deploymentId, f.deploymentId));
  if (f.environmentId !== undefined) {
    where.push(inArray(logLines.deploymentId, ex.select({ id: deployments.id }).from(deployments).where(eq(deployments.environmentId, f.environmentId))));
  }
  if (f.since !== undefined) where.push(gte(logLines.at, f.since));
  if (f.until !== undefined) where.push(lt(logLines.at, f.until));
  if (f.stream !== undefined) where.push(eq(logLines.stream, f.stream));
  if (f.q !== undefined && f.q !== "") where.push(sql`position(lower(${f.q}) in lower(${logLines.message})) > 0`);
  return where;
}

/**
 * How a text search (`q`) reads: a substring match has no index to use, so it scans
 * the project's lines in windows of sequence numbers, one short statement each,
 * giving way to other requests between them (their queries run between two windows,
 * on the embedded database too, where a statement holds the only connection and,
 * in-thread, the event loop); the windows of all searches take turns. A window is sized from the last one's duration to
 * take about `statementMs`. A page's search stops after `budgetMs` or once it has
 * spanned `budgetRows` sequence numbers, and answers what it found so far as
 * partial, with the cursor to go on from. Tests may change these.
 */
export const logSearchSettings = {
  /** Target duration of one window's statement. */
  statementMs: 5,
  /** Sequence numbers in the first window; later ones adapt. */
  firstWindow: 500,
  minWindow: 50,
  maxWindow: 50_000,
  /** A page's search answers partial after this long… */
  budgetMs: 1000,
  /** …or after spanning this many sequence numbers. */
  budgetRows: 200_000,
};

/** Lets queued I/O and timers run before going on (a macrotask: promise continuations alone would starve them). */
export function yieldToOthers(): Promise<void> {
  return new Promise((resolve) => (typeof setImmediate === "function" ? setImmediate(resolve) : setTimeout(resolve, 0)));
}

/**
 * The windows of every search in this process take turns, one at a time, each after
 * giving way to other work: however many searches run at once, a turn of the event
 * loop (and the embedded database) holds at most one window.
 */
let lane: Promise<void> = Promise.resolve();
/**
 * Not on the Worker: there each request has its own database pool, and a request
 * canceled mid-read could leave the next one waiting on a promise of its context.
 */
const takeTurns = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent !== "Cloudflare-Workers";

/** A window of sequence numbers whose size follows the duration of its reads (see logSearchSettings). */
export class ScanWindow {
  size = logSearchSettings.firstWindow;

  /** Runs one read in its turn (see `lane`) and resizes the window from the read's duration. */
  async read<T>(run: () => Promise<T>): Promise<T> {
    const before = takeTurns ? lane : undefined;
    let release = () => {};
    if (takeTurns) {
      lane = new Promise((resolve) => {
        release = resolve;
      });
    }
    try {
      await before;
      await yieldToOthers();
      const started = performance.now();
      const out = await run();
      const took = Math.max(performance.now() - started, 0.5);
      const s = logSearchSettings;
      // At most 4x larger at a time (a read of an empty range says little); smaller at once.
      const next = Math.min(this.size * 4, Math.round((this.size * s.statementMs) / took));
      this.size = Math.max(s.minWindow, Math.min(s.maxWindow, next));
      return out;
    } finally {
      release();
    }
  }
}

/** The project's lowest sequence number below `belowSeq` (a primary-key lookup), or undefined when it has none. */
export async function lowestSeq(ex: Executor, projectId: string, belowSeq: number): Promise<number | undefined> {
  const [row] = await ex
    .select({ seq: min(logLines.seq) })
    .from(logLines)
    .where(and(eq(logLines.projectId, projectId), lt(logLines.seq, belowSeq)));
  return row?.seq ?? undefined;
}

export interface RuntimePage {
  rows: LogLineRow[];
  /** Older matching lines may exist before `resumeBefore` (or before the first row). */
  more: boolean;
  /** The search stopped at its budget: lines before `resumeBefore` were not read yet. */
  partial: boolean;
  /** With `partial`: the sequence number to page on from (lines before it). */
  resumeBefore?: number;
}

/**
 * A page of runtime lines ending before `beforeSeq` (none: the newest), the newest
 * `limit` that match, returned oldest first; `more` tells whether older ones match.
 * With `q`, a bounded search in windows (logSearchSettings) that may answer partial.
 */
export async function listRuntimeLines(
  ex: Executor,
  orgId: string,
  projectId: string,
  f: RuntimeFilter,
  beforeSeq: number | undefined,
  limit: number,
): Promise<RuntimePage> {
  if (f.q !== undefined && f.q !== "") return searchRuntimeLines(ex, orgId, projectId, f, beforeSeq, limit);
  const where = runtimeWhere(ex, orgId, projectId, f);
  if (beforeSeq !== undefined) where.push(lt(logLines.seq, beforeSeq));
  const rows = await ex
    .select(lineColumns)
    .from(logLines)
    .where(and(...where))
    .orderBy(desc(logLines.seq))
    .limit(limit + 1);
  const more = rows.length > limit;
  return { rows: rows.slice(0, limit).reverse(), more, partial: false };
}

/** listRuntimeLines with `q`: newest windows first, until `limit + 1` matches, the project's first line, or the budget. */
async function searchRuntimeLines(
  ex: Executor,
  orgId: string,
  projectId: string,
  f: RuntimeFilter,
  beforeSeq: number | undefined,
  limit: number,
): Promise<RuntimePage> {
  const started = performance.now();
  const where = runtimeWhere(ex, orgId, projectId, f);
  let hi = beforeSeq ?? (await committedLastSeq(ex, projectId)) + 1;
  const floor = await lowestSeq(ex, projectId, hi);
  const found: LogLineRow[] = [];
  if (floor === undefined) return { rows: found, more: false, partial: false };
  const window = new ScanWindow();
  let spanned = 0;
  while (hi > floor) {
    const lo = Math.max(floor, hi - window.size);
    const rows = await window.read(() =>
      ex
        .select(lineColumns)
        .from(logLines)
        .where(and(...where, gte(logLines.seq, lo), lt(logLines.seq, hi)))
        .orderBy(desc(logLines.seq))
        .limit(limit + 1 - found.length),
    );
    found.push(...rows);
    if (found.length > limit) return { rows: found.slice(0, limit).reverse(), more: true, partial: false };
    spanned += hi - lo;
    hi = lo;
    if (hi > floor && (performance.now() - started >= logSearchSettings.budgetMs || spanned >= logSearchSettings.budgetRows)) {
      return { rows: found.reverse(), more: true, partial: true, resumeBefore: hi };
    }
  }
  return { rows: found.reverse(), more: false, partial: false };
}

/** Runtime lines with `afterSeq < seq <= uptoSeq` that match, oldest first (the stream's read). */
export async function readRuntimeLines(
  ex: Executor,
  orgId: string,
  projectId: string,
  f: RuntimeFilter,
  afterSeq: number,
  uptoSeq: number,
  limit: number,
): Promise<LogLineRow[]> {
  return ex
    .select(lineColumns)
    .from(logLines)
    .where(and(...runtimeWhere(ex, orgId, projectId, f), gt(logLines.seq, afterSeq), lte(logLines.seq, uptoSeq)))
    .orderBy(asc(logLines.seq))
    .limit(limit);
}

/**
 * The project's last committed sequence number (0: none yet). Every line up to it
 * is committed or was rolled back with its counter: writers commit in sequence
 * order (the counter row stays locked until commit), so a reader may move its
 * cursor here even when no line up to it matched its filters.
 */
export async function committedLastSeq(ex: Executor, projectId: string): Promise<number> {
  const [row] = await ex.select({ last: logSequences.last }).from(logSequences).where(eq(logSequences.projectId, projectId));
  return row?.last ?? 0;
}

/** A deployment's project, status and failure reason (the streams' end check), or undefined when it is not the organization's. */
export async function deploymentState(
  ex: Executor,
  orgId: string,
  id: string,
): Promise<{ projectId: string; status: (typeof deployments.$inferSelect)["status"]; failureReason: string | null } | undefined> {
  const [row] = await ex
    .select({ projectId: deployments.projectId, status: deployments.status, failureReason: deployments.failureReason })
    .from(deployments)
    .where(and(eq(deployments.id, id), eq(deployments.orgId, orgId)));
  return row;
}
