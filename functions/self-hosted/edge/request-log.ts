/**
 * The `request` log line an edge writes for each request it first receives: the
 * self-hosted edge (edge.ts) and the Worker's edge (functions/worker-edge.ts) write
 * the same line. Query strings and headers are never stored (they carry secrets);
 * paths are cut at MAX_LOGGED_PATH characters.
 */
import { type PendingRequestLine, pendingRequestLine } from "../../logs/request-batches";
import type { EdgeTarget } from "./store";

/** Paths are logged up to this many characters. */
export const MAX_LOGGED_PATH = 2048;

export interface RequestOutcome {
  method: string | undefined;
  host: string | null;
  path: string;
  client: string;
  status: number;
  durationMs: number;
  bytes: number;
  ruleId: string | null;
  at: Date;
}

export function requestLogLine(target: EdgeTarget, o: RequestOutcome): PendingRequestLine {
  return pendingRequestLine(target.projectId, target.orgId, {
    at: o.at.getTime(),
    deploymentId: target.deployment?.id ?? null,
    method: o.method ?? "",
    host: o.host,
    path: o.path.length > MAX_LOGGED_PATH ? o.path.slice(0, MAX_LOGGED_PATH) : o.path,
    status: o.status,
    durationMs: o.durationMs,
    bytes: o.bytes,
    clientAddress: o.client,
    environment: target.environment,
    rule: o.ruleId,
  });
}
