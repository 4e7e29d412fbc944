/**
 * The `wsp` command (package.json `bin`). Usage:
 *
 *   wsp deploy <folder> [--api URL] [--token TOKEN] [--org ORG_ID] [--name NAME] [--project PROJECT_ID] [--json]
 *
 * --api, --token and --org default to WORKSPACE_API_URL, WORKSPACE_TOKEN and
 * WORKSPACE_ORG (prefer the variable for the token: arguments show in `ps`).
 */
import { parseArgs } from "node:util";
import { CliError, deploy, summary } from "./deploy";

export const USAGE = `Usage: wsp deploy <folder> [options]

Packs the folder (honouring .gitignore and .dockerignore), uploads it, detects
its build configuration and creates or updates the project.

Options:
  --api <url>        API base URL (default: $WORKSPACE_API_URL)
  --token <token>    access token (default: $WORKSPACE_TOKEN)
  --org <orgId>      organization (default: $WORKSPACE_ORG, else the token's default)
  --name <name>      project name (default: the folder's name)
  --project <id>     update this project instead of creating one
  --json             print the project as JSON
  -h, --help         show this help
`;

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  tty: boolean;
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
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });

export async function main(argv: string[], io: Io): Promise<number> {
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
  const [command, folder, ...rest] = positionals;
  if (command !== "deploy" || !folder || rest.length > 0) {
    io.err(`Unknown command: ${positionals.join(" ")}\n\n${USAGE}`);
    return 2;
  }
  const api = values.api ?? io.env.WORKSPACE_API_URL;
  const token = values.token ?? io.env.WORKSPACE_TOKEN;
  if (!api || !token) {
    io.err(`Missing ${!api ? "--api (or WORKSPACE_API_URL)" : "--token (or WORKSPACE_TOKEN)"}\n`);
    return 2;
  }
  try {
    const result = await deploy({
      folder,
      api,
      token,
      org: values.org ?? io.env.WORKSPACE_ORG,
      name: values.name,
      projectId: values.project,
      log: io.err,
      tty: io.tty,
    });
    io.out(values.json ? `${JSON.stringify(result.project, null, 2)}\n` : summary(result));
    return 0;
  } catch (e) {
    if (e instanceof CliError) io.err(`Error: ${e.message}\n`);
    else io.err(`Error: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
