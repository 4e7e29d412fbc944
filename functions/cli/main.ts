/**
 * The `wsp` command (package.json `bin`): `wsp <command> [options]`, one file per
 * command under commands/. What they share (the Io, the global options, where paths
 * resolve from, the server/token/organization/project a command acts on): command.ts.
 *
 * Exit status: 0 done, 1 the operation failed (the API refused it, a build failed,
 * nothing to roll back to), 2 a usage mistake (unknown command or option, a missing
 * argument, not signed in).
 */
import { parseArgs } from "node:util";
import { type Command, type Ctx, GLOBAL_OPTIONS, type Io, type MainOptions, UsageError, type Values } from "./command";
import { deployCommand } from "./commands/deploy";
import { domainsCommand } from "./commands/domains";
import { envCommand } from "./commands/env";
import { linkCommand } from "./commands/link";
import { loginCommand } from "./commands/login";
import { logoutCommand } from "./commands/logout";
import { logsCommand } from "./commands/logs";
import { openCommand } from "./commands/open";
import { promoteCommand, rollbackCommand } from "./commands/promote";
import { whoamiCommand } from "./commands/whoami";
import { RUNNER_SUMMARY, runnerMain } from "./runner";

export type { Io, MainOptions };

export const COMMANDS: readonly Command[] = [
  loginCommand,
  logoutCommand,
  whoamiCommand,
  linkCommand,
  deployCommand,
  logsCommand,
  envCommand,
  promoteCommand,
  rollbackCommand,
  domainsCommand,
  openCommand,
];

const GLOBAL_HELP = `Global options:
  --api <url>        the server (default: $WORKSPACE_API_URL, else the one wsp login saved)
  --token <token>    access token (default: $WORKSPACE_TOKEN, else the one wsp login saved;
                     prefer the variable to the option: arguments show in ps)
  --org <orgId>      organization (default: $WORKSPACE_ORG, else the folder's link, else the
                     one wsp login saved, else the token's default)
  --json             machine-readable output on stdout (messages stay on stderr)
  -h, --help         this help
`;

export const USAGE = `Usage: wsp <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(9)}  ${c.summary}\n`).join("")}  runner     ${RUNNER_SUMMARY}
${GLOBAL_HELP}
Paths are resolved from the folder wsp was run in ($INIT_CWD under npm run wsp).
wsp login saves the sign-in in $XDG_CONFIG_HOME/wsp/config.json (else
~/.config/wsp/config.json), mode 0600. A folder is bound to its project in
.wsp/project.json (wsp link, or its first wsp deploy).
Exit status: 0 done, 1 the operation failed, 2 a usage mistake.
Run wsp <command> --help for a command's own options.
`;

const NAMES = new Set(COMMANDS.map((c) => c.name));

const helpOf = (c: Command) => `${c.usage}\n${GLOBAL_HELP}`;

/** The command named first; options may come before it (`wsp --api URL deploy`). */
function split(argv: string[]): { command: Command | undefined; name: string | undefined; args: string[] } {
  const at = argv[0]?.startsWith("-") ? argv.findIndex((a) => NAMES.has(a)) : 0;
  const name = at === -1 ? undefined : argv[at];
  return { command: COMMANDS.find((c) => c.name === name), name, args: at === -1 ? argv : [...argv.slice(0, at), ...argv.slice(at + 1)] };
}

export async function main(argv: string[], io: Io, options: MainOptions = {}): Promise<number> {
  // wsp runner: a long-running process with options of its own (./runner.ts).
  if (argv[0] === "runner") return runnerMain(argv.slice(1), io);
  if (argv.length === 0) {
    io.err(USAGE);
    return 2;
  }
  if (argv[0] === "help" || ((argv[0] === "--help" || argv[0] === "-h") && argv.length === 1)) {
    const about = COMMANDS.find((c) => c.name === argv[1]);
    io.out(about ? helpOf(about) : USAGE);
    return 0;
  }
  const { command, name, args } = split(argv);
  if (!command) {
    const asked = argv.includes("--help") || argv.includes("-h");
    if (asked && name === undefined) {
      io.out(USAGE);
      return 0;
    }
    io.err(`Unknown command: ${name ?? argv.join(" ")}\n\n${USAGE}`);
    return 2;
  }
  let ctx: Ctx;
  try {
    const parsed = parseArgs({ args, allowPositionals: true, strict: true, options: { ...GLOBAL_OPTIONS, ...command.options } });
    ctx = { io, values: parsed.values as Values, positionals: parsed.positionals, options };
  } catch (e) {
    io.err(`${e instanceof Error ? e.message : String(e)}\n\n${helpOf(command)}`);
    return 2;
  }
  if (ctx.values.help) {
    io.out(helpOf(command));
    return 0;
  }
  try {
    return await command.run(ctx);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`${e.message}\n\nRun wsp ${command.name} --help for its options.\n`);
      return 2;
    }
    io.err(`Error: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
