/**
 * `wsp login`: signs in to a server once and saves the sign-in (../config.ts), so later
 * commands need neither --api nor --token. With a token: checked (GET /api/me) and saved
 * as it is. With an e-mail address: the server mails a code (POST /api/auth/login; 503 when
 * it has no mailer), the code opens a session (POST /api/auth/verify), the session mints a
 * token named for this machine (POST /api/tokens; it expires with the session, 7 days at
 * most), and the session is ended (POST /api/auth/logout): only the token is kept.
 */
import { hostname } from "node:os";
import { apiBase, CliError, call, checkToken, reasonOf } from "../api";
import { type Command, type Ctx, print, str, UsageError } from "../command";
import { readLogin, type SavedLogin, writeLogin } from "../config";

/** The server `npm start` runs, when neither --api, WORKSPACE_API_URL nor a saved sign-in names one. */
export const DEFAULT_API = "http://127.0.0.1:8787";

interface Me {
  user: { id: string; email: string; name?: string | null };
  organizations: Array<{ id: string; name: string; role: string }>;
  activeOrganizationId: string | null;
}

/** A request with the session cookie (the browser's way: Origin must be the API's own). */
async function withCookie(api: string, cookie: string, method: "POST", path: string, body?: unknown): Promise<Response> {
  return fetch(`${apiBase(api)}${path}`, {
    method,
    headers: {
      cookie,
      origin: new URL(apiBase(api)).origin,
      accept: "application/json",
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  }).catch((e) => {
    throw new CliError(`${method} ${path}: ${reasonOf(e)}`);
  });
}

const detailOf = async (res: Response) => {
  const text = await res.text();
  try {
    return (JSON.parse(text) as { detail?: string }).detail ?? text.slice(0, 200);
  } catch {
    return text.slice(0, 200);
  }
};

/** E-mail code → session → a token for this machine; the session is ended after. */
async function loginByEmail(ctx: Ctx, api: string, email: string): Promise<{ token: string; tokenId: string; expiresAt: string | null }> {
  try {
    await fetch(`${apiBase(api)}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ email }),
      signal: AbortSignal.timeout(30_000),
    }).then(async (res) => {
      if (res.status === 503)
        throw new CliError(
          `${apiBase(api)} cannot send e-mail: sign in with a token instead (wsp login --token <token>; a new server saves its first one in DATA_DIR/owner-token)`,
        );
      if (res.status !== 202) throw new CliError(`POST /api/auth/login: ${res.status} ${await detailOf(res)}`);
    });
  } catch (e) {
    throw e instanceof CliError ? e : new CliError(`POST /api/auth/login: ${reasonOf(e)}`);
  }
  ctx.io.err(`If ${email} has an account, a sign-in code is on its way.\n`);
  const code = (await ctx.io.prompt!("Code from the e-mail: ")).trim();
  const verified = await fetch(`${apiBase(api)}/api/auth/verify`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ email, code }),
    signal: AbortSignal.timeout(30_000),
  }).catch((e) => {
    throw new CliError(`POST /api/auth/verify: ${reasonOf(e)}`);
  });
  if (verified.status !== 200) throw new CliError(`POST /api/auth/verify: ${verified.status} ${await detailOf(verified)}`);
  await verified.body?.cancel();
  const cookie = verified.headers
    .getSetCookie()
    .map((c) => c.split(";")[0]!)
    .find((c) => /^(__Host-)?wsp_session=/.test(c));
  if (!cookie) throw new CliError("POST /api/auth/verify: the answer set no session cookie");
  try {
    const minted = await withCookie(api, cookie, "POST", "/api/tokens", { name: `wsp on ${hostname()}`.slice(0, 100) });
    if (minted.status !== 201) throw new CliError(`POST /api/tokens: ${minted.status} ${await detailOf(minted)}`);
    const body = (await minted.json()) as { id: string; token: string; expiresAt: string | null };
    return { token: body.token, tokenId: body.id, expiresAt: body.expiresAt };
  } finally {
    // Only the token is kept: the session it came from ends now.
    await withCookie(api, cookie, "POST", "/api/auth/logout")
      .then((r) => r.body?.cancel())
      .catch(() => {});
  }
}

export const loginCommand: Command = {
  name: "login",
  summary: "sign in to a server and remember it (token or e-mail code)",
  usage: `Usage: wsp login [--api URL] [--token TOKEN | --email ADDRESS] [--org ORG_ID] [--json]

Signs in and saves the server, the token and the organization in
$XDG_CONFIG_HOME/wsp/config.json (else ~/.config/wsp/config.json), mode 0600:
later commands need no --api or --token. The saved token is only ever sent to
the server it was saved for.

  --api <url>        the server (default: $WORKSPACE_API_URL, else the saved one, else ${DEFAULT_API})
  --token <token>    a personal access token (a new server saves its first in DATA_DIR/owner-token)
  --email <address>  e-mail a sign-in code and ask for it; the server mints a token for this
                     machine (it expires within 7 days; wsp logout revokes it). Needs a server
                     with e-mail configured.
  --org <orgId>      act in this organization (default: the token's default one)
  --json             print who signed in as JSON

Without --token or --email, wsp asks for either.
`,
  options: { email: { type: "string" } },
  async run(ctx) {
    if (ctx.positionals.length > 0) throw new UsageError("login takes no arguments");
    const saved = await readLogin(ctx.io.env);
    const api = apiBase(str(ctx, "api") ?? ctx.io.env.WORKSPACE_API_URL ?? saved?.api ?? DEFAULT_API);
    let token = str(ctx, "token");
    let email = str(ctx, "email");
    if (token && email) throw new UsageError("--token and --email are two ways to sign in: pick one");
    if (!token && !email) {
      if (!ctx.io.prompt) throw new UsageError("Pass --token or --email (there is no terminal to ask on)");
      const answer = (await ctx.io.prompt(`Sign in to ${api} with a token (wsp_…) or an e-mail address: `)).trim();
      if (answer.includes("@")) email = answer;
      else token = answer;
    }
    if (email && !ctx.io.prompt) throw new UsageError("--email asks for the code from the e-mail: run it in a terminal");
    let minted: { tokenId: string; expiresAt: string | null } | undefined;
    if (email) {
      const got = await loginByEmail(ctx, api, email);
      token = got.token;
      minted = got;
    }
    if (!token) throw new UsageError("No token given");
    const org = str(ctx, "org");
    const client = { api, token, org };
    await checkToken(client);
    const { body: me } = await call<Me>(client, "GET", "/api/me");
    const login: SavedLogin = { api, token, ...(org ? { org } : {}), ...(minted ? { tokenId: minted.tokenId } : {}), email: me.user.email };
    const file = await writeLogin(ctx.io.env, login);
    const active = me.organizations.find((o) => o.id === me.activeOrganizationId);
    print(
      ctx,
      { api, user: me.user, organization: active ?? null, config: file, ...(minted ? { tokenExpiresAt: minted.expiresAt } : {}) },
      `Signed in to ${api} as ${me.user.email}${active ? ` (organization ${active.name}, ${active.id})` : ""}\n` +
        `Saved in ${file}${minted?.expiresAt ? `; the token expires ${minted.expiresAt}` : ""}\n`,
    );
    return 0;
  },
};
