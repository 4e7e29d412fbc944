/**
 * The `request` log line an edge writes for each request it first receives: the
 * self-hosted edge (edge.ts) and the Worker's edge (functions/worker-edge.ts) write
 * the same line. Query strings and headers are never stored (they carry secrets);
 * paths are cut at MAX_LOGGED_PATH characters.
 */
import type { NewLogLine } from "../../logs/store";
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

export function requestLogLine(target: EdgeTarget, o: RequestOutcome): NewLogLine {
  const shownPath = o.path.length > MAX_LOGGED_PATH ? o.path.slice(0, MAX_LOGGED_PATH) : o.path;
  return {
    orgId: target.orgId,
    projectId: target.projectId,
    deploymentId: target.deployment?.id ?? null,
    kind: "request",
    stream: "system",
    at: o.at,
    message: `${o.method} ${shownPath} ${o.status} ${o.durationMs}ms`,
    fields: {
      method: o.method,
      host: o.host,
      path: shownPath,
      status: o.status,
      durationMs: o.durationMs,
      bytes: o.bytes,
      clientAddress: o.client,
      environment: target.environment,
      rule: o.ruleId,
    },
  };
}
