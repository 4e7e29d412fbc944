/**
 * The runtime a shared suite runs on, chosen by its vitest project (`provide: { runtime }`
 * in vitest.config.ts): each file under test/suites/ runs once per runtime project. A
 * runtime's harness module is imported only when its harness opens, so workerd never
 * evaluates the Node harness (node:fs, PGlite) and Node never evaluates cloudflare:test.
 */
import { inject } from "vitest";
import type { WorkerOverrides } from "../../functions/worker";
import { useHarness, type Harness, type HarnessFactory } from "./harness";
import type { HarnessServices } from "./node-harness";

export type Runtime = Harness["runtime"];

declare module "vitest" {
  export interface ProvidedContext {
    /** Set by each runtime project in vitest.config.ts. */
    runtime: Runtime;
  }
}

/** Services a suite injects in place of the runtime's own. */
export interface RuntimeServices {
  node?: HarnessServices;
  worker?: WorkerOverrides;
  /** Settings an operator would give, on either runtime (Node: the environment; the Worker: vars), e.g. ORG_ARTIFACT_QUOTA_MB. */
  env?: Record<string, string>;
}

export function currentRuntime(): Runtime {
  const runtime = inject("runtime");
  if (!runtime) throw new Error("test/suites/ files run in a runtime project (node-pglite, node-postgres or worker), which provides `runtime`");
  return runtime;
}

/** True when the runtime's database runs transactions concurrently (real Postgres); known while tests are collected. */
export const runtimeHasRealConcurrency = (runtime: Runtime) => runtime !== "node-pglite" && inject("pgKind") === "postgres";

/** A factory that opens `open(runtime)`, the runtime's own modules loaded lazily inside it. */
export function runtimeFactory<H extends Harness>(open: (runtime: Runtime) => Promise<H>): HarnessFactory {
  const runtime = currentRuntime();
  return Object.assign(() => open(runtime), { realConcurrency: () => runtimeHasRealConcurrency(runtime) });
}

async function openRuntimeHarness(runtime: Runtime, services: RuntimeServices): Promise<Harness> {
  if (runtime === "worker") return (await import("./worker-harness")).openWorkerHarness(services.worker, services.env);
  const node = await import("./node-harness");
  return runtime === "node-pglite" ? node.openPgliteHarness(services.node, services.env) : node.openPostgresHarness(services.node, services.env);
}

/**
 * The harness of the project's runtime: registers beforeAll/afterAll (see useHarness) and
 * returns the harness, filled in once ready. `H` names the runtime harnesses' common extras
 * a suite relies on (the upload store and sweep, for the folder suites).
 */
export function useRuntimeHarness<H extends Harness = Harness>(services: RuntimeServices = {}): H {
  return useHarness(runtimeFactory((runtime) => openRuntimeHarness(runtime, services))) as H;
}
