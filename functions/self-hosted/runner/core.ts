/**
 * The runner core on a control plane transport: the sandbox (or why there is none
 * here), the supervisor and the runner, wired the same way for the adapter's
 * in-process runner (services.ts, on the database control) and for a build
 * server's `wsp runner` (functions/cli/runner.ts, on the HTTP control).
 */
import type { GitHosts } from "../../../shared/git/hosts";
import type { Logger } from "../../../shared/http/logger";
import type { RunnerSettings } from "../config";
import type { RunnerControl } from "./control";
import { createRunner, type Runner } from "./runner";
import { createSandbox, type Sandbox, SandboxUnavailable, sandboxKey } from "./sandbox/sandbox";
import { createSupervisor } from "./supervisor";

export interface RunnerCoreDeps<C extends RunnerControl> {
  settings: RunnerSettings;
  gitHosts: GitHosts;
  /** Work directories go under dataDir/deployments/, build caches under dataDir. */
  dataDir: string;
  logger: Logger;
  allowPrivate: boolean;
  /** The transport, made once the sandbox works here. */
  control: () => C;
}

export interface RunnerCore<C extends RunnerControl> {
  runner: Runner;
  sandbox: Sandbox;
  control: C;
}

/**
 * The runner's sandbox, or undefined when it cannot work here (bubblewrap
 * missing, not root, namespaces refused): the runner is then not started (the
 * API and edge still serve; deployments wait in the queue for a runner that
 * can confine them) and the reason is logged. RUNNER_SANDBOX=off is warned about.
 */
async function sandboxOrWhyNot(settings: RunnerSettings, logger: Logger): Promise<Sandbox | undefined> {
  try {
    const sandbox = await createSandbox(settings.sandbox, sandboxKey(settings.id));
    if (!sandbox.confined) logger.error("runner_sandbox_off", { message: sandbox.describe() });
    return sandbox;
  } catch (error) {
    if (!(error instanceof SandboxUnavailable)) throw error;
    logger.error("runner_not_started", { reason: error.message });
    return undefined;
  }
}

/** The runner on `control`, in its sandbox; undefined when no sandbox can work here (the reason is logged). Not started yet. */
export async function createRunnerCore<C extends RunnerControl>(deps: RunnerCoreDeps<C>): Promise<RunnerCore<C> | undefined> {
  const sandbox = await sandboxOrWhyNot(deps.settings, deps.logger);
  if (!sandbox) return undefined;
  const control = deps.control();
  const runner = createRunner({
    control,
    gitHosts: deps.gitHosts,
    settings: deps.settings,
    dataDir: deps.dataDir,
    logger: deps.logger,
    createSupervisor,
    sandbox,
    allowPrivate: deps.allowPrivate,
  });
  return { runner, sandbox, control };
}
