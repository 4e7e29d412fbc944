/**
 * Server logs: the `request` lines the edges write (one per request first received;
 * stored a batch row per project and flush: request-batches.ts, request-lines.ts).
 * Reads walk a project's batches by sequence number, a bounded step at a time: the
 * batches' numbers first (no lines), then the lines of at most STEP_LINES of them,
 * decoded and filtered here (each filter one comparison on a short value, so a read is
 * linear in the lines it decodes), giving way to other requests between steps.
 */
import { and, asc, between, desc, eq, gt, gte, lt, lte, type SQL } from "drizzle-orm";
import { apiTokens, requestLogBatches } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { findProject } from "../projects/store";
import { MAX_ROW_LINES } from "./request-batches";
import { decodeRequestLines, type RequestLine } from "./request-lines";
import { yieldToOthers } from "./store";

export interface RequestLineRow {
  seq: number;
  line: RequestLine;
}

export interface RequestFilter {
  /** A status class (2 for 2xx) or an exact code. */
  status?: { class: number } | { code: number };
  method?: string;
  /** Path prefix (paths never carry their query). */
  path?: string;
  /** Inclusive. */
  since?: Date;
}

/** Lines decoded per step at most (one batch more when a single batch is larger). */
const STEP_LINES = 10_000;
/** Batch numbers read per step. */
const HEADS_PER_STEP = 200;

function matches(l: RequestLine, f: RequestFilter): boolean {
  if (f.status !== undefined && ("class" in f.status ? Math.floor(l.status / 100) !== f.status.class : l.status !== f.status.code)) return false;
  if (f.method !== undefined && l.method !== f.method) return false;
  if (f.path !== undefined && !l.path.startsWith(f.path)) return false;
  if (f.since !== undefined && l.at < f.since.getTime()) return false;
  return true;
}

const b = requestLogBatches;

function batchesOf(orgId: string, projectId: string, f: RequestFilter): SQL[] {
  const out: SQL[] = [eq(b.projectId, projectId), eq(b.orgId, orgId)];
  if (f.since !== undefined) out.push(gte(b.lastAt, f.since));
  return out;
}

/** The leading batches of `heads` holding up to STEP_LINES lines (at least one batch). */
function step(heads: { firstSeq: number; lastSeq: number }[]): { firstSeq: number; lastSeq: number }[] {
  let lines = 0;
  let n = 0;
  while (n < heads.length && (n === 0 || lines + heads[n]!.lastSeq - heads[n]!.firstSeq + 1 <= STEP_LINES)) {
    lines += heads[n]!.lastSeq - heads[n]!.firstSeq + 1;
    n++;
  }
  return heads.slice(0, n);
}

/** The newest `limit` matching lines before `beforeSeq` (none: the newest), returned oldest first. */
export async function listRequestLines(
  ex: Executor,
  orgId: string,
  projectId: string,
  f: RequestFilter,
  beforeSeq: number | undefined,
  limit: number,
): Promise<{ rows: RequestLineRow[]; more: boolean }> {
  const found: RequestLineRow[] = [];
  let hi = beforeSeq;
  for (;;) {
    const where = batchesOf(orgId, projectId, f);
    if (hi !== undefined) where.push(lt(b.firstSeq, hi));
    const heads = await ex
      .select({ firstSeq: b.firstSeq, lastSeq: b.lastSeq })
      .from(b)
      .where(and(...where))
      .orderBy(desc(b.firstSeq))
      .limit(HEADS_PER_STEP);
    if (heads.length === 0) break;
    const picked = step(heads);
    const lowest = picked[picked.length - 1]!.firstSeq;
    const batches = await ex
      .select({ firstSeq: b.firstSeq, lines: b.lines })
      .from(b)
      .where(and(eq(b.projectId, projectId), eq(b.orgId, orgId), between(b.firstSeq, lowest, picked[0]!.firstSeq)))
      .orderBy(desc(b.firstSeq));
    for (const batch of batches) {
      const lines = decodeRequestLines(batch.lines);
      for (let i = lines.length - 1; i >= 0; i--) {
        const seq = batch.firstSeq + i;
        if ((hi === undefined || seq < hi) && matches(lines[i]!, f)) found.push({ seq, line: lines[i]! });
      }
      if (found.length > limit) return { rows: found.slice(0, limit).reverse(), more: true };
    }
    if (picked.length === heads.length && heads.length < HEADS_PER_STEP) break;
    hi = lowest;
    await yieldToOthers();
  }
  return { rows: found.reverse(), more: false };
}

/** Matching lines with `afterSeq < seq <= uptoSeq`, oldest first, at most `limit` (the stream's read). */
export async function readRequestLines(
  ex: Executor,
  orgId: string,
  projectId: string,
  f: RequestFilter,
  afterSeq: number,
  uptoSeq: number,
  limit: number,
): Promise<RequestLineRow[]> {
  const found: RequestLineRow[] = [];
  let lo = afterSeq;
  while (lo < uptoSeq) {
    // A batch numbers at most MAX_ROW_LINES lines: one holding `lo + 1` starts after `lo - MAX_ROW_LINES` (the index range).
    const heads = await ex
      .select({ firstSeq: b.firstSeq, lastSeq: b.lastSeq })
      .from(b)
      .where(and(...batchesOf(orgId, projectId, f), gt(b.firstSeq, lo - MAX_ROW_LINES), gt(b.lastSeq, lo), lte(b.firstSeq, uptoSeq)))
      .orderBy(asc(b.firstSeq))
      .limit(HEADS_PER_STEP);
    if (heads.length === 0) break;
    const picked = step(heads);
    const batches = await ex
      .select({ firstSeq: b.firstSeq, lines: b.lines })
      .from(b)
      .where(and(eq(b.projectId, projectId), eq(b.orgId, orgId), between(b.firstSeq, picked[0]!.firstSeq, picked[picked.length - 1]!.firstSeq)))
      .orderBy(asc(b.firstSeq));
    for (const batch of batches) {
      const lines = decodeRequestLines(batch.lines);
      for (let i = 0; i < lines.length; i++) {
        const seq = batch.firstSeq + i;
        if (seq > lo && seq <= uptoSeq && matches(lines[i]!, f)) {
          found.push({ seq, line: lines[i]! });
          if (found.length === limit) return found;
        }
      }
    }
    lo = picked[picked.length - 1]!.lastSeq;
    if (picked.length === heads.length && heads.length < HEADS_PER_STEP) break;
  }
  return found;
}

export interface NewStreamToken {
  orgId: string;
  userId: string;
  tokenHash: string;
  displayPrefix: string;
  scopes: string[];
  expiresAt: Date;
  /** The caller's token or cookie session (Caller.tokenId): streams opened with this token end with it. */
  parentId: string;
}

/** Stores a log-stream token for the caller's project (404 when it is not theirs). */
export async function createLogStreamToken(db: Db, projectId: string, t: NewStreamToken): Promise<void> {
  await db.transaction(async (tx) => {
    const project = await findProject(tx, t.orgId, projectId, "key share");
    await tx.insert(apiTokens).values({
      id: newId("tok"),
      userId: t.userId,
      name: `log stream ${project.id}`,
      tokenHash: t.tokenHash,
      displayPrefix: t.displayPrefix,
      scopes: t.scopes,
      expiresAt: t.expiresAt,
      kind: "log_stream",
      projectId: project.id,
      orgId: t.orgId,
      parentId: t.parentId,
    });
  });
}
