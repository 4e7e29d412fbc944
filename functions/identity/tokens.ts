/**
 * Personal access tokens of the caller, behind `token:manage`: a narrowly scoped
 * token cannot see, mint or revoke the user's other tokens. A new token's scopes
 * must lie within the caller's effective tags; omitted scopes inherit the calling
 * token's, so a scoped token can never mint a broader one, and its expiry is
 * capped at the calling token's, so it never outlives it either. Revoking is
 * immediate and revokes that token only (no lineage is kept: tokens it minted are
 * listed and revoked one by one). Only personal tokens are listed here;
 * deployment-session tokens expire by themselves.
 */
import { z } from "@hono/zod-openapi";
import { holdsPersonalTag, TAGS } from "../../shared/auth/permissions";
import { capToParent } from "../../shared/auth/token-lifetime";
import { badRequest, notFound } from "../../shared/http/errors";
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { withAudit } from "../operations/audit/record";
import { Name, TagSchema } from "./schema";
import { issueToken, listPersonalTokens, revokePersonalToken, type TokenRow } from "./store";

export const TokenSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    displayPrefix: z.string().openapi({ description: "The token's first characters, to recognize it" }),
    scopes: z.array(TagSchema).nullable().openapi({ description: "null: every tag the role grants" }),
    expiresAt: z.string().nullable().openapi({ description: "null: never expires. Never later than the expiry of the token that minted it" }),
    createdAt: z.string(),
  })
  .openapi("Token");

export const CreatedTokenSchema = TokenSchema.extend({
  token: z.string().openapi({ description: "The secret; shown only in this response" }),
}).openapi("CreatedToken");

const view = (t: TokenRow) => ({
  id: t.id,
  name: t.name,
  displayPrefix: t.displayPrefix,
  scopes: t.scopes as z.infer<typeof TagSchema>[] | null,
  expiresAt: t.expiresAt?.toISOString() ?? null,
  createdAt: t.createdAt.toISOString(),
});

const create = defineRoute({
  method: "post",
  path: "/tokens",
  tags: ["Identity"],
  summary: "Create a personal access token (shown once)",
  description:
    "Requires `token:manage`. The new token's `scopes` must lie within the caller's effective tags (400 naming `scopes` otherwise); omitted, they are the calling token's. The new token never outlives the calling token: when the calling token has an expiry, an omitted `expiresAt` becomes that expiry and a later one is lowered to it (no error); the response's `expiresAt` is the effective one. A token minted this way is independent afterwards: revoking the calling token does not revoke it.",
  permission: "token:manage",
  request: {
    body: jsonRequest(
      z.strictObject({
        name: Name,
        scopes: z.array(TagSchema).max(32).optional().openapi({ description: "Subset of the caller's effective tags; omitted: the calling token's scopes" }),
        expiresAt: z.iso
          .datetime({ offset: true })
          .optional()
          .openapi({ description: "Must be in the future; capped at the calling token's expiry, if it has one" }),
      }),
    ),
  },
  responses: { 201: jsonResponse(CreatedTokenSchema, "The token; `token` is never shown again") },
});

const list = defineRoute({
  method: "get",
  path: "/tokens",
  tags: ["Identity"],
  summary: "List the caller's active tokens",
  description:
    "Requires `token:manage`. The caller's own unrevoked personal tokens (deployment-session tokens are not listed), oldest first, never with the secret.",
  permission: "token:manage",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(pageOf(TokenSchema, "TokenPage"), "Tokens, oldest first") },
});

const revoke = defineRoute({
  method: "delete",
  path: "/tokens/{id}",
  tags: ["Identity"],
  summary: "Revoke one of the caller's tokens",
  description:
    "Requires `token:manage` (a token scoped without it cannot revoke any token, itself included). Takes effect on the next request. Revokes this token only, not the tokens it minted. Another user's token id answers 404 like an unknown one.",
  permission: "token:manage",
  request: { params: z.object({ id: pathId("id") }) },
  responses: { 204: { description: "Revoked" } },
});

export const tokensRouter = createRouter()
  .openapi(create, async (c) => {
    const body = c.req.valid("json");
    const caller = callerOf(c);
    const scopes = body.scopes ? [...new Set(body.scopes)] : caller.scopes;
    if (body.scopes) {
      // Personal tags (token:manage) are held through the scopes alone, even without an organization.
      const held = TAGS.filter((t) => caller.tags.includes(t) || holdsPersonalTag(caller.scopes, t));
      const beyond = body.scopes.find((s) => !held.includes(s));
      if (beyond) throw badRequest("scopes", `scope '${beyond}' is beyond your permissions in the active organization`, held);
    }
    const wanted = body.expiresAt ? new Date(body.expiresAt) : null;
    if (wanted && wanted <= c.get("clock")()) throw badRequest("expiresAt", "expiresAt must be in the future");
    const expiresAt = await capToParent(c.get("db"), caller.tokenId, wanted);
    const { row, token } = await withAudit(
      c,
      (tx) => issueToken(tx, { userId: caller.userId, name: body.name, scopes, expiresAt }),
      ({ row }) => ({ action: "token.created", target: { kind: "token", id: row.id }, details: { name: row.name, scopes } }),
    );
    return c.json({ ...view(row), token }, 201);
  })
  .openapi(list, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const caller = callerOf(c);
    const page = toPage(await listPersonalTokens(c.get("db"), caller.userId, limit, cursor), limit, (t) => t.id);
    return c.json({ items: page.items.map(view), nextCursor: page.nextCursor }, 200);
  })
  .openapi(revoke, async (c) => {
    const { id } = c.req.valid("param");
    const caller = callerOf(c);
    const revoked = await withAudit(
      c,
      (tx) => revokePersonalToken(tx, caller.userId, id, c.get("clock")()),
      (done) => (done ? { action: "token.revoked", target: { kind: "token", id } } : null),
    );
    if (!revoked) throw notFound("Token");
    c.get("services").authCache?.invalidate(caller.userId);
    return c.body(null, 204);
  });
