/**
 * The metrics counted where things happen in this process, kept in one
 * process-wide registry (not prom-client's global one, which a dependency could
 * also fill): each producer makes a one-line call (countEdgeRequest,
 * countLogLines), whether or not anything scrapes. prom-client's default metrics
 * (event-loop lag, CPU, memory, heap, handles, GC) are registered here once.
 *
 * Labels are bounded by construction: statuses, methods and names the code
 * chooses, never an id, a host, a path or anything a client sends.
 */
import { collectDefaultMetrics, Counter, Registry } from "prom-client";

export const processRegistry = new Registry();
// Event-loop lag (`nodejs_eventloop_lag_*`, sampled every 10 ms), CPU, memory, GC: the process's own health.
collectDefaultMetrics({ register: processRegistry, eventLoopMonitoringPrecision: 10 });

const edgeRequests = new Counter({
  name: "wsp_edge_requests_total",
  help: "Requests to a project's hostname the edge answered (the app's answer, or the edge's own page; a Host no project has is not counted), by status and by the kind of route rule that refused it: none, access (ban, allow-deny), rate_limit.",
  labelNames: ["status", "rule"] as const,
  registers: [processRegistry],
});

const logLines = new Counter({
  name: "wsp_log_lines_total",
  help: "Log lines of apps, builds and the edge: `ingested` (queued for the log store), `dropped` (over RUNNER_LOG_RATE, the writer's queue full, or a failed write).",
  labelNames: ["outcome"] as const,
  registers: [processRegistry],
});

/**
 * One request the edge answered (edge.ts's `record`). `rule`: `none` (no route rule refused it), `rate_limit`
 * (a rate-limit rule: 429) or `access` (a ban or allow-deny rule: 403). Kinds, not rule ids: ids grow with projects.
 */
export function countEdgeRequest(status: number, ruleId: string | null): void {
  const rule = ruleId === null ? "none" : status === 429 ? "rate_limit" : "access";
  edgeRequests.inc({ status: String(status), rule });
}

export function countLogLines(outcome: "ingested" | "dropped", lines = 1): void {
  if (lines > 0) logLines.inc({ outcome }, lines);
}
