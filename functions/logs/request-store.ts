/**
 * Server logs: the `request` lines the self-hosted edge writes (one per proxied
 * request; fields: method, host, path without query, status, durationMs, bytes,
 * clientAddress, environment, rule). Filters read those fields; each is one
 * comparison on a short value, so a read is linear in the lines it scans.
 */
import { and, asc, desc, eq, gt, gte, lt, lte, type SQL, sql } from "drizzle-orm";
import { apiTokens, logLines } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { findProject } from "../projects/store";

export type RequestLineRow = Pick<typeof logLines.$inferSelect, "seq" | "at" | "deploymentId" | "fields">;

const columns = { seq: logLines.seq, at: logLines.at, deploymentId: logLines.deploymentId, fields: logLines.fields };

export interface RequestFilter {
  /** A status class (2 for 2xx) or an exact code. */
  status?: { class: number } | { code: number };
  method?: string;
  /** Path prefix (paths never carry their query). */
  path?: string;
  /** Inclusive. */
  since?: Date;
}

function where(orgId: string, projectId: string, f: RequestFilter): SQL[] {
  const out: SQL[] = [eq(logLines.projectId, projectId), eq(logLines.kind, "request"), eq(logLines.orgId, orgId)];
  const status = sql`(${logLines.fields}->>'status')::int`;
  if (f.status && "class" in f.status) out.push(sql`${status} between ${f.status.class * 100} and ${f.status.class * 100 + 99}`);
  if (f.status && "code" in f.status) out.push(sql`${status} = ${f.status.code}`);
  if (f.method !== undefined) out.push(sql`${logLines.fields}->>'method' = ${f.method}`);
  if (f.path !== undefined) out.push(sql`starts_with(${logLines.fields}->>'path', ${f.path})`);
  if (f.since !== undefined) out.push(gte(logLines.at, f.since));
  return out;
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
  const w = where(orgId, projectId, f);
  if (beforeSeq !== undefined) w.push(lt(logLines.seq, beforeSeq));
  const rows = await ex
    .select(columns)
    .from(logLines)
    .where(and(...w))
    .orderBy(desc(logLines.seq))
    .limit(limit + 1);
  return { rows: rows.slice(0, limit).reverse(), more: rows.length > limit };
}

/** Matching lines with `afterSeq < seq <= uptoSeq`, oldest first (the stream's read). */
export async function readRequestLines(
  ex: Executor,
  orgId: string,
  projectId: string,
  f: RequestFilter,
  afterSeq: number,
  uptoSeq: number,
  limit: number,
): Promise<RequestLineRow[]> {
  return ex
    .select(columns)
    .from(logLines)
    .where(and(...where(orgId, projectId, f), gt(logLines.seq, afterSeq), lte(logLines.seq, uptoSeq)))
    .orderBy(asc(logLines.seq))
    .limit(limit);
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
