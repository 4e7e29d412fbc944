/** `wsp deploy [folder]`: the folder (default: where wsp was run) uploaded, built and followed (../deploy.ts). */
import { deploy, summary } from "../deploy";
import { type Command, flag, pathFrom, str, targetOf, UsageError } from "../command";
import { readLink } from "../link";
import { formatBuildLine } from "../logs";

export const deployCommand: Command = {
  name: "deploy",
  summary: "upload this folder and build it (production, or --env NAME)",
  usage: `Usage: wsp deploy [folder] [--prod | --env NAME] [--name NAME] [--project ID] [--no-wait] [--json]

Packs the folder (default: the one wsp was run in; honouring .gitignore and
.dockerignore), uploads it, detects its build configuration, creates or updates
the project, queues its build and follows the build log to the end (exit status
0 when it is ready, 1 when it failed or was canceled). The first deploy of a
folder links it to its project in .wsp/project.json (project and organization
ids and the API URL, no token; never uploaded): deploying the folder again
updates that project (wsp link binds a folder to an existing project first).
Delete .wsp/project.json to deploy the folder as a new project.

A project with a linked git repository (--project, or the folder's link) is
deployed from its repository instead: nothing is uploaded. When your Settings'
forwardGitToServer is on, wsp reads your git credential for the repository's
host (git credential fill: your configured helper, never a prompt, 10 s at most)
and sends it with the deployment: its clone uses it once and the server deletes
it; it is never stored past the job, logged or shown. Off: the project's or
your Settings clone token is used.

Options:
  --prod             deploy to production (the default)
  --env <name>       deploy to this environment instead
  --name <name>      the project's name (default: its current name, else the folder's)
  --project <id>     update this project (default: the one the folder is linked to)
  --no-wait          return once the build is queued
  --json             print the project (with its deployment) as JSON; the build log goes to stderr
`,
  options: {
    prod: { type: "boolean" },
    env: { type: "string" },
    name: { type: "string" },
    project: { type: "string" },
    "no-wait": { type: "boolean" },
  },
  async run(ctx) {
    if (ctx.positionals.length > 1) throw new UsageError("deploy takes one folder");
    const env = str(ctx, "env");
    if (flag(ctx, "prod") && env !== undefined && env !== "production") throw new UsageError("--prod and --env name two environments: pick one");
    const folder = pathFrom(ctx.io, ctx.positionals[0] ?? ".");
    // The folder's own link is read by deploy itself: the target's is the working directory's.
    const { client, login } = await targetOf(ctx);
    const linked = await readLink(folder);
    const json = flag(ctx, "json");
    const result = await deploy({
      folder,
      ...client,
      // A linked folder deploys in its project's organization; the working directory's link is not this folder's.
      org: str(ctx, "org") ?? ctx.io.env.WORKSPACE_ORG ?? (linked ? undefined : login?.org),
      name: str(ctx, "name"),
      projectId: str(ctx, "project"),
      environment: flag(ctx, "prod") ? "production" : env,
      noWait: flag(ctx, "no-wait"),
      log: ctx.io.err,
      // With --json the build log goes to stderr: stdout carries the JSON only.
      line: (l) => (json ? ctx.io.err : ctx.io.out)(formatBuildLine(l)),
      tty: ctx.io.tty,
      follow: ctx.options.follow,
      // `git credential fill` (a git project, forwardGitToServer on) runs in wsp's own environment.
      gitEnv: ctx.io.env,
    });
    const deployment = result.end ? { ...result.deployment, status: result.end.status, failureReason: result.end.failureReason } : result.deployment;
    ctx.io.out(json ? `${JSON.stringify({ ...result.project, deployment }, null, 2)}\n` : summary(result, client.api));
    if (result.end && result.end.status !== "ready") {
      ctx.io.err(
        `Error: deployment ${result.deployment.id} ${result.end.status === "failed" ? "failed" : "was canceled"}${result.end.failureReason ? `: ${result.end.failureReason}` : ""}\n`,
      );
      return 1;
    }
    return 0;
  },
};
