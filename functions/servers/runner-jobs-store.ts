/**
 * The runner protocol's SQL (./runner-jobs.ts): which deployments a build server
 * may claim, whether a job is this server's, and its log batches. Claims, leases,
 * transitions and serving state go through the runner's own store functions
 * (functions/self-hosted/runner/store.ts), the ones the in-process runner uses.
 */
import { and, eq, inArray, isNull, or, sql } from "drizzle-orm";
import { deployments, environments, projects } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import type { DeploymentRow } from "../deployments/store";
import { appendLogLines, type LogKind, type LogStream, type NewLogLine } from "../logs/store";
import { claimWhere, WORKING } from "../self-hosted/runner/store";
import type { ServerRow } from "./store";

/**
 * Claims the oldest deployment this server may take, for it (claimed_by = its id): placed on a
 * server, of its organization, and either placed on it or on any server whose labels include
 * the deployment's. Queued ones, and ones whose lease ran out (their server died) are taken over.
 */
export function claimForServer(db: Db, server: Pick<ServerRow, "id" | "orgId" | "labels">, now: Date): Promise<DeploymentRow | undefined> {
  const placed = and(
    eq(deployments.orgId, server.orgId),
    eq(deployments.placement, "server"),
    or(eq(deployments.serverId, server.id), and(isNull(deployments.serverId), sql`${deployments.serverLabels} <@ ${sql.param(server.labels)}::text[]`)),
  )!;
  return claimWhere(db, server.id, placed, now);
}

/** The deployment `id` of the organization; undefined for another organization's or an unknown one (404 alike). */
export async function deploymentOfOrg(db: Db, orgId: string, id: string): Promise<DeploymentRow | undefined> {
  const [row] = await db
    .select()
    .from(deployments)
    .where(and(eq(deployments.id, id), eq(deployments.orgId, orgId)));
  return row;
}

/** The server holds the job's lease: it claimed it and it is still building or deploying. */
export const holdsLease = (d: DeploymentRow, serverId: string) => d.claimedBy === serverId && WORKING.includes(d.status);

/** The server runs the job's app (recorded by setServing). */
export const serves = (d: DeploymentRow, serverId: string) => d.servedBy === serverId;

export interface RunnerLogLine {
  seq: number;
  kind: LogKind;
  stream: LogStream;
  at: string;
  message: string;
}

/**
 * Stores a batch of the runner's lines for deployment `d`, idempotent by sequence: the
 * deployment row is locked, only lines above its `runner_log_seq` are stored (in seq order),
 * and it is raised to the batch's highest in the same transaction. A retried batch stores
 * nothing; two copies of one batch racing store it once. Returns how many were stored and the
 * highest sequence now held.
 */
export async function appendRunnerLogs(db: Db, d: DeploymentRow, lines: RunnerLogLine[]): Promise<{ stored: number; lastSeq: number }> {
  return db.transaction(async (tx) => {
    const [row] = await tx.select({ last: deployments.runnerLogSeq }).from(deployments).where(eq(deployments.id, d.id)).for("update");
    const last = row?.last ?? 0;
    const fresh = lines.filter((l) => l.seq > last).sort((a, b) => a.seq - b.seq);
    // One line per sequence: a batch naming one twice keeps the first.
    const seen = new Set<number>();
    const unique: RunnerLogLine[] = [];
    for (const l of fresh) {
      if (seen.has(l.seq)) continue;
      seen.add(l.seq);
      unique.push(l);
    }
    if (unique.length === 0) return { stored: 0, lastSeq: last };
    const toStore: NewLogLine[] = unique.map((l) => ({
      orgId: d.orgId,
      projectId: d.projectId,
      deploymentId: d.id,
      kind: l.kind,
      stream: l.stream,
      at: new Date(l.at),
      message: l.message,
    }));
    await appendLogLines(tx as unknown as Db, toStore);
    const lastSeq = unique[unique.length - 1]!.seq;
    await tx.update(deployments).set({ runnerLogSeq: lastSeq }).where(eq(deployments.id, d.id));
    return { stored: unique.length, lastSeq };
  });
}

/** How long after a job failed or was canceled its leftovers (the failure event, its archive) may still be reported. */
export const LEFTOVERS_MS = 15 * 60_000;

/**
 * The server worked on the job: it holds its claim or serves its app; or the job failed or was
 * canceled within LEFTOVERS_MS while placed where this server could build it (its own, or any
 * server of the organization): a finish drops the claim from the row, and the runner then
 * reports the failure event and discards the archive. Events and the job's leftovers are its to report.
 */
export function workedOn(d: DeploymentRow, serverId: string, now: Date): boolean {
  if (d.claimedBy === serverId || d.servedBy === serverId) return true;
  const justEnded = (d.status === "failed" || d.status === "canceled") && d.finishedAt !== null && now.getTime() - d.finishedAt.getTime() < LEFTOVERS_MS;
  return justEnded && d.placement === "server" && (d.serverId === null || d.serverId === serverId);
}

/** Which of `ids` are deployments of the organization (the others are left out of a batch read, like unknown ids). */
export async function deploymentIdsOfOrg(db: Db, orgId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: deployments.id })
    .from(deployments)
    .where(and(eq(deployments.orgId, orgId), inArray(deployments.id, ids)));
  return rows.map((r) => r.id);
}

/** Which of `ids` are projects of the organization. */
export async function projectIdsOfOrg(db: Db, orgId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: projects.id })
    .from(projects)
    .where(and(eq(projects.orgId, orgId), inArray(projects.id, ids)));
  return rows.map((r) => r.id);
}

/** The environment `id` of the organization; undefined for another organization's (404 alike). */
export async function environmentOfOrg(db: Db, orgId: string, id: string) {
  const [row] = await db
    .select({ id: environments.id, name: environments.name, kind: environments.kind, autoRollback: environments.autoRollback })
    .from(environments)
    .where(and(eq(environments.id, id), eq(environments.orgId, orgId)));
  return row;
}

/** The project `id` of the organization, when this server claimed or serves one of its deployments (its sandbox uid is the server's to know). */
export async function projectWorkedOn(db: Db, orgId: string, projectId: string, serverId: string): Promise<{ found: boolean; worked: boolean }> {
  const [project] = await db
    .select({ id: projects.id })
    .from(projects)
    .where(and(eq(projects.id, projectId), eq(projects.orgId, orgId)));
  if (!project) return { found: false, worked: false };
  const [d] = await db
    .select({ id: deployments.id })
    .from(deployments)
    .where(and(eq(deployments.projectId, projectId), or(eq(deployments.claimedBy, serverId), eq(deployments.servedBy, serverId))))
    .limit(1);
  return { found: true, worked: d !== undefined };
}
