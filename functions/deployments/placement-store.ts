/**
 * Placement's reads: the organization's servers (one query) and the caller's
 * Settings, turned into the placement columns a deployment is queued with, and
 * the waiting reason recomputed when a queued deployment is read.
 */
import { eq } from "drizzle-orm";
import { servers } from "../../shared/db/schema";
import type { Executor } from "../../shared/db/types";
import type { AppContext } from "../../shared/http/context";
import { badRequest } from "../../shared/http/errors";
import { readSettings } from "../settings/store";
import { type CandidateServer, type Decision, decidePlacement, type PlacementChoice, type WaitingFor, waitingFor } from "./placement";
import type { DeploymentRow, NewDeployment } from "./store";

/** What placement needs of each server of the organization: at most 100 short rows (MAX_SERVERS_PER_ORG), one indexed query. */
export async function candidateServers(ex: Executor, orgId: string): Promise<CandidateServer[]> {
  return ex
    .select({ id: servers.id, labels: servers.labels, draining: servers.draining, lastSeenAt: servers.lastSeenAt })
    .from(servers)
    .where(eq(servers.orgId, orgId));
}

export type PlacementFields = Pick<NewDeployment, "placement" | "serverId" | "serverLabels" | "waitingFor">;

/**
 * The placement of a deployment queued now by `userId` (null: a push, which
 * follows the defaults). Runs before anything is written: a per-deploy
 * `serverId` that is not one of the organization's servers is 400 naming
 * `serverId` (another organization's reads like an unknown one).
 */
export async function placementFor(c: AppContext, orgId: string, userId: string | null, choice: PlacementChoice = {}): Promise<PlacementFields> {
  const db = c.get("db");
  const config = c.get("config");
  const known = await candidateServers(db, orgId);
  if (choice.serverId !== undefined && !known.some((s) => s.id === choice.serverId)) {
    throw badRequest("serverId", "serverId must name a build server of this organization (GET /api/servers)");
  }
  const settings = userId ? await readSettings(db, { orgId, userId }) : { buildMode: "auto" as const, defaultDeployTarget: null, defaultServerId: null };
  const decision = decidePlacement(choice, settings, { cloud: config.mode === "cloud", localRunner: config.localRunner === true });
  return {
    placement: decision.placement,
    serverId: decision.serverId,
    serverLabels: decision.labels,
    waitingFor: waitingFor(decision, known, c.get("clock")()),
  };
}

const decisionOf = (d: Pick<DeploymentRow, "placement" | "serverId" | "serverLabels">): Decision => ({
  placement: d.placement,
  serverId: d.serverId,
  labels: d.serverLabels,
});

/**
 * The waiting reason of each deployment as of now. Only queued server
 * placements can wait; for them the organization's servers are read once (one
 * query, whatever the number of deployments: a list page costs one more query,
 * a read of anything else none), so a server that came online since the
 * deployment was queued clears its reason on the next read. Nothing is written.
 */
export async function currentWaiting(ex: Executor, orgId: string, rows: DeploymentRow[], now: Date): Promise<Map<string, WaitingFor | null>> {
  const out = new Map<string, WaitingFor | null>(rows.map((d) => [d.id, null]));
  const waiting = rows.filter((d) => d.status === "queued" && d.placement === "server");
  if (waiting.length === 0) return out;
  const known = await candidateServers(ex, orgId);
  for (const d of waiting) out.set(d.id, waitingFor(decisionOf(d), known, now));
  return out;
}
