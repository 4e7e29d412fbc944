/**
 * Build servers' SQL. Every query filters by organization: another
 * organization's server is not found, like an unknown id. A server's runner
 * token is minted and hashed like every other token (shared/auth/tokens.ts);
 * only the hash is stored, and deleting the row is what revokes it.
 */
import { and, asc, count, eq, gt, inArray, or } from "drizzle-orm";
import { displayPrefix, generateToken, hashToken, RUNNER_TOKEN_PREFIX } from "../../shared/auth/tokens";
import type { Keyring } from "../../shared/crypto/keyring";
import { deriveEdgeKey } from "../../shared/net/edge-forward";
import { deployments, servers, type ServerFacts } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { ApiError } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { type DeploymentStatus, transition } from "../deployments/store";
import { MAX_SERVERS_PER_ORG, type Running } from "./schema";

export type ServerRow = typeof servers.$inferSelect;

/** Deployment states in which a server holds a build (its lease). */
const BUILDING: DeploymentStatus[] = ["building", "deploying"];
const RUNNING_SHOWN = 100;

const uniqueLabels = (labels: string[] | undefined) => [...new Set(labels ?? [])];

/** Where a server's edge key lives (the keyring's additional data): it decrypts on this row only. */
export const edgeKeyContext = (s: { orgId: string; id: string }) => ({ orgId: s.orgId, table: "servers", column: "edge_key", rowId: s.id });

/**
 * Registers a server. Its edge key (the key that signs requests forwarded to its edge,
 * shared/net/edge-forward.ts) is derived from the runner token now, the only time the
 * token is known here, and stored encrypted; the runner derives the same from its token.
 */
export async function createServer(
  db: Db,
  keyring: Keyring,
  input: { orgId: string; userId: string; name: string; labels?: string[]; publicUrl?: string },
  now: Date,
): Promise<{ row: ServerRow; token: string }> {
  const token = generateToken(RUNNER_TOKEN_PREFIX);
  const tokenHash = hashToken(token);
  const id = newId("srv", now.getTime());
  const edgeKeyCiphertext = await keyring.encrypt(await deriveEdgeKey(token), edgeKeyContext({ orgId: input.orgId, id }));
  const row = await db.transaction(async (tx) => {
    const [held] = await tx.select({ n: count() }).from(servers).where(eq(servers.orgId, input.orgId));
    if ((held?.n ?? 0) >= MAX_SERVERS_PER_ORG) {
      throw new ApiError("conflict", `An organization has at most ${MAX_SERVERS_PER_ORG} build servers: delete one first`);
    }
    const [created] = await tx
      .insert(servers)
      .values({
        id,
        orgId: input.orgId,
        name: input.name,
        labels: uniqueLabels(input.labels),
        publicUrl: input.publicUrl ?? null,
        tokenHash,
        tokenPrefix: displayPrefix(token),
        edgeKeyCiphertext,
        createdBy: input.userId,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return created!;
  });
  return { row, token };
}

export async function findServer(ex: Executor, orgId: string, id: string): Promise<ServerRow | undefined> {
  const [row] = await ex
    .select()
    .from(servers)
    .where(and(eq(servers.id, id), eq(servers.orgId, orgId)));
  return row;
}

/** Whether `id` names a server of the organization (Settings' defaultServerId). */
export async function serverExists(ex: Executor, orgId: string, id: string): Promise<boolean> {
  return (await findServer(ex, orgId, id)) !== undefined;
}

/** `limit + 1` servers after `cursor`, oldest first. */
export async function listServers(db: Db, orgId: string, limit: number, cursor?: string): Promise<ServerRow[]> {
  return db
    .select()
    .from(servers)
    .where(and(eq(servers.orgId, orgId), cursor ? gt(servers.id, cursor) : undefined))
    .orderBy(asc(servers.id))
    .limit(limit + 1);
}

/** What each server holds: builds it claimed and ready apps it serves (by runner id = server id). */
export async function runningOn(db: Db, orgId: string, serverIds: string[]): Promise<Map<string, Running[]>> {
  const out = new Map<string, Running[]>(serverIds.map((id) => [id, []]));
  if (serverIds.length === 0) return out;
  const rows = await db
    .select({
      id: deployments.id,
      projectId: deployments.projectId,
      status: deployments.status,
      claimedBy: deployments.claimedBy,
      servedBy: deployments.servedBy,
    })
    .from(deployments)
    .where(
      and(
        eq(deployments.orgId, orgId),
        or(
          and(inArray(deployments.claimedBy, serverIds), inArray(deployments.status, BUILDING)),
          and(inArray(deployments.servedBy, serverIds), eq(deployments.status, "ready")),
        ),
      ),
    )
    .orderBy(asc(deployments.id));
  for (const r of rows) {
    const serverId = BUILDING.includes(r.status) ? r.claimedBy : r.servedBy;
    const list = serverId ? out.get(serverId) : undefined;
    if (list && list.length < RUNNING_SHOWN) list.push({ id: r.id, projectId: r.projectId, status: r.status });
  }
  return out;
}

export async function updateServer(
  db: Db,
  orgId: string,
  id: string,
  patch: { name?: string; labels?: string[]; publicUrl?: string | null; draining?: boolean },
  now: Date,
): Promise<ServerRow | undefined> {
  const [row] = await db
    .update(servers)
    .set({
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.labels !== undefined ? { labels: uniqueLabels(patch.labels) } : {}),
      ...(patch.publicUrl !== undefined ? { publicUrl: patch.publicUrl } : {}),
      ...(patch.draining !== undefined ? { draining: patch.draining } : {}),
      updatedAt: now,
    })
    .where(and(eq(servers.id, id), eq(servers.orgId, orgId)))
    .returning();
  return row;
}

/**
 * Deletes the server in one transaction: its token goes with the row (refused
 * from the next request on), a build it holds goes back to `queued` with no
 * lease (recorded), and each ready deployment whose app it served becomes
 * `failed` (no longer current) with a reason naming the deleted server: its app
 * ran there and stops with it. Undefined: no such server in the organization.
 */
export interface StoppedDeployment {
  id: string;
  projectId: string;
  environmentId: string;
  /** It was its environment's current deployment: its app was running. */
  wasCurrent: boolean;
  reason: string;
}

export async function deleteServer(db: Db, orgId: string, id: string, now: Date): Promise<{ requeued: string[]; stopped: StoppedDeployment[] } | undefined> {
  return db.transaction(async (tx) => {
    const [server] = await tx
      .delete(servers)
      .where(and(eq(servers.id, id), eq(servers.orgId, orgId)))
      .returning({ id: servers.id, name: servers.name });
    if (!server) return undefined;
    const held = await tx
      .select()
      .from(deployments)
      .where(and(eq(deployments.orgId, orgId), eq(deployments.claimedBy, id), inArray(deployments.status, BUILDING)))
      .orderBy(asc(deployments.id))
      .for("update");
    for (const d of held) {
      await transition(tx, d, "queued", now);
      await tx.update(deployments).set({ claimedBy: null, leaseExpiresAt: null }).where(eq(deployments.id, d.id));
    }
    const served = await tx
      .select()
      .from(deployments)
      .where(and(eq(deployments.orgId, orgId), eq(deployments.servedBy, id), eq(deployments.status, "ready")))
      .orderBy(asc(deployments.id))
      .for("update");
    const reason = `The build server '${server.name}' (${server.id}) that ran this deployment's app was deleted at ${now.toISOString()}: the app stopped with it. Deploy again to run it on another server`;
    for (const d of served) {
      // Not current first: a current deployment must be ready (deployments_current_ready).
      await tx.update(deployments).set({ current: false, servedBy: null, port: null }).where(eq(deployments.id, d.id));
      await transition(tx, d, "failed", now, reason);
    }
    return {
      requeued: held.map((d) => d.id),
      stopped: served.map((d) => ({ id: d.id, projectId: d.projectId, environmentId: d.environmentId, wasCurrent: d.current, reason })),
    };
  });
}

/** The runner's heartbeat: when it was heard from and what it reports (omitted fields keep their last value). */
export async function recordHeartbeat(
  db: Db,
  serverId: string,
  report: { version?: string; capacity?: number; sandbox?: ServerFacts; limits?: ServerFacts; labels?: string[] },
  now: Date,
): Promise<ServerRow | undefined> {
  const [row] = await db
    .update(servers)
    .set({
      lastSeenAt: now,
      ...(report.version !== undefined ? { version: report.version } : {}),
      ...(report.capacity !== undefined ? { capacity: report.capacity } : {}),
      ...(report.sandbox !== undefined ? { sandbox: report.sandbox } : {}),
      ...(report.limits !== undefined ? { limits: report.limits } : {}),
      ...(report.labels !== undefined ? { labels: report.labels } : {}),
    })
    .where(eq(servers.id, serverId))
    .returning();
  return row;
}
