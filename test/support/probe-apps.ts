/**
 * The readiness suite's apps over databases built to fail a check, on the suite's
 * runtime: the Node adapter (probe-apps-node.ts) or the Worker (probe-apps-worker.ts),
 * each loaded only on its own runtime.
 */
import type { CodeMigration } from "../../shared/db/migration-level";
import type { RequestOptions } from "./harness";
import type { Runtime } from "./runtime";

export interface ProbeApp {
  request(path: string, init?: RequestOptions): Promise<Response>;
  close(): Promise<void>;
}

/** `unreachable`: no query succeeds; `recorded`: a database whose migration record holds exactly these. */
export type ProbeDatabase = "unreachable" | { recorded: CodeMigration[] };

export async function openProbeApp(runtime: Runtime, database: ProbeDatabase): Promise<ProbeApp> {
  if (runtime === "worker") return (await import("./probe-apps-worker")).openProbeApp(database);
  return (await import("./probe-apps-node")).openProbeApp(runtime, database);
}
