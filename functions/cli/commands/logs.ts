/** `wsp logs [project]`: runtime logs, or a deployment's build log (../logs.ts). */
import { type Command, flag, projectRef, str, targetOf, UsageError } from "../command";
import { logs } from "../logs";

export const logsCommand: Command = {
  name: "logs",
  summary: "a project's runtime logs, or a deployment's build log",
  usage: `Usage: wsp logs [project] [--follow] [--env NAME] [--deployment ID] [--limit N] [--json]

Prints the project's runtime logs (newest last); [project] is an id, a name or a
slug (default: the project this folder is linked to). Each line is labelled with
where it comes from, its environment and the end of its deployment id:
[production dpl_…a1b2].

Options:
  -f, --follow       keep printing new lines until Ctrl-C (with --deployment: until the build ends)
  --env <name>       only that environment's runtime lines (default: all of them)
  --deployment <id>  that deployment's build log instead of the runtime logs
  --limit <n>        how many recent lines to print first (1-1000, default 100)
  --project <ref>    the project (as the positional argument)
  --json             one JSON object per line
`,
  options: {
    follow: { type: "boolean", short: "f" },
    env: { type: "string" },
    deployment: { type: "string" },
    limit: { type: "string" },
    project: { type: "string" },
  },
  async run(ctx) {
    if (ctx.positionals.length > 1) throw new UsageError("logs takes one project");
    const limitText = str(ctx, "limit");
    const limit = limitText === undefined ? undefined : Number(limitText);
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) throw new UsageError("--limit must be a whole number from 1 to 1000");
    // A build log is one deployment's: there is nothing to narrow.
    if (str(ctx, "env") !== undefined && str(ctx, "deployment") !== undefined)
      throw new UsageError("--env narrows the runtime logs; a build log (--deployment) is one deployment's");
    const target = await targetOf(ctx);
    const project = projectRef(ctx, target, ctx.positionals[0] ?? str(ctx, "project"));
    const json = flag(ctx, "json");
    const end = await logs({
      ...target.client,
      project,
      deploymentId: str(ctx, "deployment"),
      environment: str(ctx, "env"),
      followLogs: flag(ctx, "follow"),
      limit,
      out: ctx.io.out,
      format: json ? (l) => `${JSON.stringify(l)}\n` : undefined,
      log: ctx.io.err,
      signal: ctx.io.signal,
      follow: ctx.options.follow,
    });
    if (end && end.status !== "ready") {
      ctx.io.err(`Error: the deployment ${end.status === "failed" ? "failed" : "was canceled"}${end.failureReason ? `: ${end.failureReason}` : ""}\n`);
      return 1;
    }
    return 0;
  },
};
