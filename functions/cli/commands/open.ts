/**
 * `wsp open`: prints where the project's app answers (its free route, with the API's
 * scheme and port: ../deploy.ts appUrl) and opens it in a browser when there is one
 * to open: a terminal on macOS or Windows, or a graphical session elsewhere.
 */
import { spawn } from "node:child_process";
import { call, resolveProject } from "../api";
import { type Command, flag, type Io, print, projectRef, str, targetOf, UsageError } from "../command";
import { appUrl } from "../deploy";

/** The command that opens a URL in the user's browser, or null when there is no display to open it on. */
function opener(io: Io): string[] | null {
  if (!io.tty) return null;
  if (process.platform === "darwin") return ["open"];
  if (process.platform === "win32") return ["cmd", "/c", "start", ""];
  return io.env.DISPLAY || io.env.WAYLAND_DISPLAY ? ["xdg-open"] : null;
}

export const openCommand: Command = {
  name: "open",
  summary: "print the project's URL (and open it in a browser when there is a display)",
  usage: `Usage: wsp open [project] [--no-browser] [--json]

Prints the URL the project's app answers at (its free route) and opens it in
the browser when there is a display. The project: an id, a name or a slug,
else the folder's link.

  --no-browser  only print it
`,
  options: { "no-browser": { type: "boolean" }, project: { type: "string" } },
  async run(ctx) {
    if (ctx.positionals.length > 1) throw new UsageError("open takes one project");
    const target = await targetOf(ctx);
    const ref = await resolveProject(target.client, projectRef(ctx, target, ctx.positionals[0] ?? str(ctx, "project")));
    const { body } = await call<{ id: string; name: string; routes: { free: { hostname: string } } }>(target.client, "GET", `/api/projects/${ref.id}`);
    const url = appUrl(body.routes.free.hostname, target.client.api);
    print(ctx, { project: body.id, url }, `${url}\n`);
    const command = flag(ctx, "no-browser") || flag(ctx, "json") ? null : opener(ctx.io);
    if (command) {
      // Best effort: a missing opener leaves the printed URL.
      const child = spawn(command[0]!, [...command.slice(1), url], { stdio: "ignore", detached: true });
      child.on("error", () => {});
      child.unref();
    }
    return 0;
  },
};
