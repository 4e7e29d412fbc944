/** `wsp link <project>`: binds the folder to an existing project in .wsp/project.json (../link.ts), as a first deploy does. */
import { apiBase, checkToken, resolveProject } from "../api";
import { type Command, cwdOf, pathFrom, print, str, targetOf, UsageError } from "../command";
import { LINK_FILE, writeLink } from "../link";

export const linkCommand: Command = {
  name: "link",
  summary: "bind this folder to an existing project (.wsp/project.json)",
  usage: `Usage: wsp link <project> [--dir FOLDER] [--json]

Binds the folder (default: the one wsp was run in) to the project (an id, a name
or a slug) in .wsp/project.json: the project and organization ids and the API
URL, no token. Later commands run in the folder act on that project without
naming it (deploy, logs, env, rollback, domains, open).
`,
  options: { dir: { type: "string" } },
  async run(ctx) {
    const [ref, ...rest] = ctx.positionals;
    if (!ref || rest.length > 0) throw new UsageError("link takes one project: its id, name or slug");
    const folder = pathFrom(ctx.io, str(ctx, "dir") ?? cwdOf(ctx.io));
    const target = await targetOf(ctx);
    // Not the folder's current link's organization: relinking may pick another organization's project.
    const client = { ...target.client, org: str(ctx, "org") ?? ctx.io.env.WORKSPACE_ORG ?? target.login?.org };
    const { orgId } = await checkToken(client);
    const project = await resolveProject({ ...client, org: orgId }, ref);
    await writeLink(folder, { projectId: project.id, orgId, api: apiBase(client.api) });
    print(ctx, { projectId: project.id, name: project.name, orgId, folder }, `Linked ${folder} to project ${project.name} (${project.id}) in ${LINK_FILE}\n`);
    return 0;
  },
};
