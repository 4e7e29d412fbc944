/** `wsp domains ls|add|rm`: a project's connected domains (GET :id/domains, POST :id/connect, DELETE :id/domains/:domain). */
import { call, resolveProject } from "../api";
import { type Command, type Ctx, print, projectRef, str, targetOf, UsageError } from "../command";

interface Domain {
  hostname: string;
  primary: boolean;
  createdAt: string;
  routing: { state: string; checkedAt: string | null };
}

async function run(ctx: Ctx): Promise<number> {
  const [sub, ...args] = ctx.positionals;
  if (sub !== "ls" && sub !== "add" && sub !== "rm") throw new UsageError("domains needs one of: ls, add, rm");
  if (sub === "ls" ? args.length > 0 : args.length !== 1)
    throw new UsageError(sub === "ls" ? "domains ls takes no arguments" : `domains ${sub} takes one domain`);
  const target = await targetOf(ctx);
  const { client } = target;
  const project = await resolveProject(client, projectRef(ctx, target, str(ctx, "project")));
  const base = `/api/projects/${project.id}`;
  if (sub === "ls") {
    const { body } = await call<{ free: { hostname: string; state: string }; items: Domain[] }>(client, "GET", `${base}/domains`);
    const rows = [
      `${body.free.hostname}  free route  ${body.free.state}`,
      ...body.items.map((d) => `${d.hostname}  ${d.primary ? "primary" : "domain"}  ${d.routing.state}`),
    ];
    print(ctx, body, `${rows.join("\n")}\n`);
    return 0;
  }
  const domain = args[0]!;
  if (sub === "add") {
    const { body } = await call<Record<string, unknown>>(client, "POST", `${base}/connect`, { body: { domain } });
    print(ctx, body, `Connected ${domain.toLowerCase().replace(/\.$/, "")} to ${project.name} as its primary domain; point its DNS at this server\n`);
    return 0;
  }
  await call(client, "DELETE", `${base}/domains/${encodeURIComponent(domain)}`);
  print(ctx, { removed: domain }, `Removed ${domain} from ${project.name}\n`);
  return 0;
}

export const domainsCommand: Command = {
  name: "domains",
  summary: "list, add or remove a project's domains",
  usage: `Usage: wsp domains ls [--project REF] [--json]
       wsp domains add <domain> [--project REF] [--json]
       wsp domains rm <domain> [--project REF] [--json]

ls: the free route and the connected domains with their routing state.
add: connects a domain; it becomes the primary one.
rm: removes one (the oldest remaining becomes primary).
The project: --project, else the folder's link.
`,
  options: { project: { type: "string" } },
  run,
};
