/** `wsp logout`: forgets the saved sign-in; a token that `wsp login` minted itself (e-mail code) is revoked first. */
import { ApiCallError, call } from "../api";
import { type Command, print, UsageError } from "../command";
import { configFile, readLogin, removeLogin } from "../config";

export const logoutCommand: Command = {
  name: "logout",
  summary: "forget the saved sign-in (revoking the token login minted)",
  usage: `Usage: wsp logout [--json]

Deletes the saved sign-in. A token that wsp login minted (e-mail sign-in) is
revoked on the server first; a token you gave it stays valid (revoke it in the
console, or DELETE /api/tokens/{id}).
`,
  options: {},
  async run(ctx) {
    if (ctx.positionals.length > 0) throw new UsageError("logout takes no arguments");
    const saved = await readLogin(ctx.io.env);
    if (!saved) {
      print(ctx, { signedOut: false, revoked: false }, "Not signed in.\n");
      return 0;
    }
    let revoked = false;
    if (saved.tokenId) {
      try {
        await call(saved, "DELETE", `/api/tokens/${encodeURIComponent(saved.tokenId)}`);
        revoked = true;
      } catch (e) {
        // Already expired or revoked: nothing left to revoke. Anything else is said, and the sign-in is still forgotten.
        if (!(e instanceof ApiCallError && (e.status === 401 || e.status === 404)))
          ctx.io.err(`Could not revoke the token: ${e instanceof Error ? e.message : String(e)}\n`);
      }
    }
    await removeLogin(ctx.io.env);
    print(
      ctx,
      { signedOut: true, revoked, api: saved.api },
      `Signed out of ${saved.api} (removed ${configFile(ctx.io.env)}${revoked ? "; its token is revoked" : saved.tokenId ? "" : "; the token itself stays valid"}).\n`,
    );
    return 0;
  },
};
