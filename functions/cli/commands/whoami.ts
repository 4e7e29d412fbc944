/** `wsp whoami`: who the token is (GET /api/me), on which server, in which organization. */
import { call, checkToken } from "../api";
import { type Command, print, targetOf, UsageError } from "../command";

interface Me {
  user: { id: string; email: string; name?: string | null };
  organizations: Array<{ id: string; name: string; role: string }>;
  activeOrganizationId: string | null;
  tokenScopes: string[] | null;
}

export const whoamiCommand: Command = {
  name: "whoami",
  summary: "who the saved sign-in (or --token) is",
  usage: `Usage: wsp whoami [--json]

Prints the user, the server and the active organization of the token in use.
`,
  options: {},
  async run(ctx) {
    if (ctx.positionals.length > 0) throw new UsageError("whoami takes no arguments");
    const { client } = await targetOf(ctx);
    await checkToken(client);
    const { body: me } = await call<Me>(client, "GET", "/api/me");
    const active = me.organizations.find((o) => o.id === me.activeOrganizationId) ?? null;
    print(
      ctx,
      { api: client.api, user: me.user, organization: active, organizations: me.organizations },
      `${me.user.email} on ${client.api}${active ? `, organization ${active.name} (${active.id}, ${active.role})` : ""}\n`,
    );
    return 0;
  },
};
