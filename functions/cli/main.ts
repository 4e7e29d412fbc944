/**
 * The `wsp` command (package.json `bin`). Usage:
 *
 *   wsp deploy <folder> [--api URL] [--token TOKEN] [--org ORG_ID] [--name NAME] [--project PROJECT_ID] [--env NAME] [--no-wait] [--json]
 *   wsp logs <project> [--follow] [--env NAME] [--deployment DEPLOYMENT_ID] [--limit N] [--api URL] [--token TOKEN] [--org ORG_ID]
 *
 * --api, --token and --org default to WORKSPACE_API_URL, WORKSPACE_TOKEN and
 * WORKSPACE_ORG (prefer the variable for the token: arguments show in `ps`).
 */
import { parseArgs } from "node:util";
import { deploy, summary } from "./deploy";
import { formatBuildLine, logs } from "./logs";
import { runnerMain } from "./runner";

export const USAGE = `Usage: wsp deploy <folder> [options]
       wsp logs <project> [options]
       wsp runner --api <url> [options]   attach this machine as a build server (wsp runner --help)

deploy: packs the folder (honouring .gitignore and .dockerignore), uploads it,
detects its build configuration, creates or updates the project, queues its
build and follows the build log to the end (exit status 0 when it is ready, 1
when it failed or was canceled). The first deploy of a folder links it to its
project in .wsp/project.json (project and organization ids and the API URL, no
token; never uploaded): deploying the folder again updates that project. Delete
.wsp/project.json to deploy the folder as a new project.

logs: prints the project's runtime logs (newest last); <project> is an id, a
name or a slug. Each line is labelled with where it comes from, its environment
and the end of its deployment id: [production dpl_…a1b2].

Options:
  --api <url>        API base URL (default: $WORKSPACE_API_URL)
  --token <token>    access token (default: $WORKSPACE_TOKEN)
  --org <orgId>      organization (default: $WORKSPACE_ORG, else the folder's link, else the token's default)
  --name <name>      deploy: project name (default: the project's current name, else the folder's name)
  --project <id>     deploy: update this project (default: the one the folder is linked to)
  --env <name>       deploy: the environment to deploy (default: production)
                     logs: only that environment's runtime lines (default: all of them)
  --no-wait          deploy: return once the build is queued
  --json             deploy: print the project (with its deployment) as JSON
  -f, --follow       logs: keep printing new lines until Ctrl-C (with --deployment: until the build ends)
  --deployment <id>  logs: that deployment's build log instead of the runtime logs
  --limit <n>        logs: how many recent lines to print first (1-1000, default 100)
  -h, --help         show this help
`;

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  tty: boolean;
  /** Aborted on Ctrl-C: a followed stream stops cleanly. */
  signal?: AbortSignal;
}

const parseCliArgs = (argv: string[]) =>
  parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      api: { type: "string" },
      token: { type: "string" },
      org: { type: "string" },
      name: { type: "string" },
      project: { type: "string" },
      env: { type: "string" },
      "no-wait": { type: "boolean" },
      json: { type: "boolean" },
      follow: { type: "boolean", short: "f" },
      deployment: { type: "string" },
      limit: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });

/** Test hook: faster reconnection of followed streams. */
export interface MainOptions {
  follow?: { retryMs?: number; idleMs?: number };
}

export async function main(argv: string[], io: Io, options: MainOptions = {}): Promise<number> {
  // wsp runner: a long-running process with options of its own (./runner.ts).
  if (argv[0] === "runner") return runnerMain(argv.slice(1), io);
  let parsed: ReturnType<typeof parseCliArgs>;
  try {
    parsed = parseCliArgs(argv);
  } catch (e) {
    io.err(`${e instanceof Error ? e.message : String(e)}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    (values.help ? io.out : io.err)(USAGE);
    return values.help ? 0 : 2;
  }
  const [command, target, ...rest] = positionals;
  if ((command !== "deploy" && command !== "logs") || !target || rest.length > 0) {
    io.err(`Unknown command: ${positionals.join(" ")}\n\n${USAGE}`);
    return 2;
  }
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) {
    io.err("--limit must be a whole number from 1 to 1000\n");
    return 2;
  }
  if (command === "logs" && values.env !== undefined && values.deployment !== undefined) {
    // A build log is one deployment's: there is nothing to narrow.
    io.err("--env narrows the runtime logs; a build log (--deployment) is one deployment's\n");
    return 2;
  }
  const api = values.api ?? io.env.WORKSPACE_API_URL;
  const token = values.token ?? io.env.WORKSPACE_TOKEN;
  if (!api || !token) {
    io.err(`Missing ${!api ? "--api (or WORKSPACE_API_URL)" : "--token (or WORKSPACE_TOKEN)"}\n`);
    return 2;
  }
  try {
    new URL(api);
  } catch {
    io.err(`--api ${JSON.stringify(api)} is not a URL\n`);
    return 2;
  }
  const org = values.org ?? io.env.WORKSPACE_ORG;
  try {
    if (command === "logs") {
      const end = await logs({
        api,
        token,
        org,
        project: target,
        deploymentId: values.deployment,
        environment: values.env,
        followLogs: values.follow,
        limit,
        out: io.out,
        log: io.err,
        signal: io.signal,
        follow: options.follow,
      });
      if (end && end.status !== "ready") {
        io.err(`Error: the deployment ${end.status === "failed" ? "failed" : "was canceled"}${end.failureReason ? `: ${end.failureReason}` : ""}\n`);
        return 1;
      }
      return 0;
    }
    const result = await deploy({
      folder: target,
      api,
      token,
      org,
      name: values.name,
      projectId: values.project,
      environment: values.env,
      noWait: values["no-wait"],
      log: io.err,
      // With --json the build log goes to stderr: stdout carries the JSON only.
      line: (l) => (values.json ? io.err : io.out)(formatBuildLine(l)),
      tty: io.tty,
      follow: options.follow,
    });
    const deployment = result.end ? { ...result.deployment, status: result.end.status, failureReason: result.end.failureReason } : result.deployment;
    io.out(values.json ? `${JSON.stringify({ ...result.project, deployment }, null, 2)}\n` : summary(result, api));
    if (result.end && result.end.status !== "ready") {
      io.err(
        `Error: deployment ${result.deployment.id} ${result.end.status === "failed" ? "failed" : "was canceled"}${result.end.failureReason ? `: ${result.end.failureReason}` : ""}\n`,
      );
      return 1;
    }
    return 0;
  } catch (e) {
    io.err(`Error: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
