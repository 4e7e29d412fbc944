/**
 * `wsp promote <deployment>` and `wsp rollback`: make a ready deployment current
 * (POST /api/deployments/:id/promote: no rebuild; it runs with the configuration it
 * pinned). Rollback promotes the newest ready deployment older than the current one.
 */
import { CliError, call, type Client, resolveProject } from "../api";
import { type Command, print, projectRef, str, targetOf, UsageError } from "../command";

interface Deployment {
  id: string;
  projectId: string;
  environment: string;
  status: string;
  current: boolean;
  createdAt: string;
}

async function promote(client: Client, id: string): Promise<Deployment> {
  return (await call<Deployment>(client, "POST", `/api/deployments/${encodeURIComponent(id)}/promote`)).body;
}

export const promoteCommand: Command = {
  name: "promote",
  summary: "make a ready deployment the current one (no rebuild)",
  usage: `Usage: wsp promote <deployment> [--json]

Makes a ready deployment the current one of its environment, without a rebuild:
the app runs with the code and the configuration that deployment pinned. A
deployment that is not ready, or already current, is refused (exit status 1).
`,
  options: {},
  async run(ctx) {
    const [id, ...rest] = ctx.positionals;
    if (!id || rest.length > 0) throw new UsageError("promote takes one deployment id");
    const { client } = await targetOf(ctx);
    const d = await promote(client, id);
    print(ctx, d, `Deployment ${d.id} is now current in ${d.environment}\n`);
    return 0;
  },
};

export const rollbackCommand: Command = {
  name: "rollback",
  summary: "make the previous ready deployment current again",
  usage: `Usage: wsp rollback [--env NAME] [--project REF] [--json]

Promotes the newest ready deployment older than the current one of the
environment (default: production) of the project (default: the folder's link).
Exit status 1 when there is none to go back to.
`,
  options: { env: { type: "string" }, project: { type: "string" } },
  async run(ctx) {
    if (ctx.positionals.length > 0) throw new UsageError("rollback takes no arguments (--project names the project)");
    const environment = str(ctx, "env") ?? "production";
    const target = await targetOf(ctx);
    const project = await resolveProject(target.client, projectRef(ctx, target, str(ctx, "project")));
    const query = new URLSearchParams({ environment, status: "ready", limit: "100" });
    const { body } = await call<{ items: Deployment[] }>(target.client, "GET", `/api/projects/${project.id}/deployments?${query}`);
    // Newest first: the ready ones after the current one are older.
    const current = body.items.findIndex((d) => d.current);
    const previous = current === -1 ? undefined : body.items[current + 1];
    if (!previous)
      throw new CliError(
        `${project.name} has no ready deployment in ${environment} older than ${current === -1 ? "a current one (none is current)" : `the current one, ${body.items[current]!.id}`}`,
      );
    const d = await promote(target.client, previous.id);
    print(ctx, { ...d, previous: body.items[current]!.id }, `Rolled ${project.name} (${environment}) back to ${d.id} (was ${body.items[current]!.id})\n`);
    return 0;
  },
};
