/**
 * Personal access tokens of the caller. A new token's scopes must lie within
 * the caller's effective tags; omitted scopes inherit the calling token's, so a
 * scoped token can never mint a broader one. Revoking is immediate. Only
 * personal tokens are listed here; deployment-session tokens expire by themselves.
 */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../shared/http/params";
import { and, asc, eq, gt, isNull } from "drizzle-orm";
import { apiTokens } from "../../shared/db/schema";
import { badRequest, notFound } from "../../shared/http/errors";
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { CreatedTokenSchema, Name, TagSchema, TokenSchema } from "./schemas";
import { issueToken } from "./store";

type TokenRow = typeof apiTokens.$inferSelect;
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
  permission: "authenticated",
  request: {
    body: jsonRequest(
      z.strictObject({
        name: Name,
        scopes: z.array(TagSchema).max(32).optional().openapi({ description: "Subset of the caller's effective tags; omitted: the calling token's scopes" }),
        expiresAt: z.iso.datetime({ offset: true }).optional().openapi({ description: "Must be in the future" }),
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
  permission: "authenticated",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(pageOf(TokenSchema, "TokenPage"), "Tokens, oldest first") },
});

const revoke = defineRoute({
  method: "delete",
  path: "/tokens/{id}",
  tags: ["Identity"],
  summary: "Revoke one of the caller's tokens",
  permission: "authenticated",
  request: { params: z.object({ id: pathId("id") }) },
  responses: { 204: { description: "Revoked" } },
});

export const tokensRouter = createRouter()
  .openapi(create, async (c) => {
    const body = c.req.valid("json");
    const caller = callerOf(c);
    const scopes = body.scopes ? [...new Set(body.scopes)] : caller.scopes;
    if (body.scopes) {
      const beyond = body.scopes.find((s) => !caller.tags.includes(s));
      if (beyond) throw badRequest("scopes", `scope '${beyond}' is beyond your permissions in the active organization`, caller.tags);
    }
    const expiresAt = body.expiresAt ? new Date(body.expiresAt) : null;
    if (expiresAt && expiresAt <= c.get("clock")()) throw badRequest("expiresAt", "expiresAt must be in the future");
    const { row, token } = await issueToken(c.get("db"), { userId: caller.userId, name: body.name, scopes, expiresAt });
    return c.json({ ...view(row), token }, 201);
  })
  .openapi(list, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const caller = callerOf(c);
    const rows = await c.get("db")
      .select()
      .from(apiTokens)
      .where(
        and(
          eq(apiTokens.userId, caller.userId),
          eq(apiTokens.kind, "personal"),
          isNull(apiTokens.revokedAt),
          cursor ? gt(apiTokens.id, cursor) : undefined,
        ),
      )
      .orderBy(asc(apiTokens.id))
      .limit(limit + 1);
    const page = toPage(rows, limit, (t) => t.id);
    return c.json({ items: page.items.map(view), nextCursor: page.nextCursor }, 200);
  })
  .openapi(revoke, async (c) => {
    const { id } = c.req.valid("param");
    const caller = callerOf(c);
    const revoked = await c.get("db")
      .update(apiTokens)
      .set({ revokedAt: c.get("clock")() })
      .where(and(eq(apiTokens.id, id), eq(apiTokens.userId, caller.userId), eq(apiTokens.kind, "personal"), isNull(apiTokens.revokedAt)))
      .returning({ id: apiTokens.id });
    if (revoked.length === 0) throw notFound("Token");
    c.get("authCache")?.invalidate(caller.userId);
    return c.body(null, 204);
  });
