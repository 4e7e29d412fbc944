/**
 * POST /api/auth/token {token} (self-hosted only): sign in by pasting a personal
 * access token once, for instances without e-mail. The session belongs to the
 * token's user and ends with the token (revoked or expired), at the latest 7 days
 * after sign-in. Only a token without scopes may sign in: a session holds every
 * tag of the user's role, so a narrowed token (a CI token) must not become one.
 */
import { z } from "@hono/zod-openapi";
import { hashToken, TOKEN_PREFIX } from "../../shared/auth/tokens";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { signedInResponse } from "./schema";
import { signIn } from "./sign-in";
import { tokenByHash } from "./store";

const route = defineRoute({
  method: "post",
  path: "/auth/token",
  tags: ["Sessions"],
  summary: "Sign in with a personal access token: sets the session cookie (self-hosted)",
  description:
    "Self-hosted only. The token is checked once and not kept in the cookie: the session (cookie as for POST /api/auth/verify) ends when the token is revoked or expires, and at the latest 7 days after sign-in. An invalid, expired or revoked token, or one with `scopes`, is 400 naming `token`.",
  permission: "public",
  request: { body: jsonRequest(z.strictObject({ token: z.string().max(512).openapi({ description: "A personal access token (`wsp_…`) without scopes" }) })) },
  responses: { 200: signedInResponse },
});

export const tokenSignInRouter = createRouter().openapi(route, async (c) => {
  const { token } = c.req.valid("json");
  const now = c.get("clock")();
  const row = token.startsWith(TOKEN_PREFIX) ? await tokenByHash(c.get("db"), hashToken(token)) : undefined;
  if (row?.kind !== "personal" || row.revokedAt || (row.expiresAt && row.expiresAt <= now)) {
    throw badRequest("token", "Invalid, expired or revoked token");
  }
  if (row.scopes !== null)
    throw badRequest("token", "A token with scopes cannot sign in (a session holds every permission of your role); use a token without scopes");
  return c.json(await signIn(c, row.userId, { tokenId: row.id, tokenExpiresAt: row.expiresAt }), 200);
});
