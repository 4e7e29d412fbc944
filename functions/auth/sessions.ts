/**
 * The caller's browser sessions: list, revoke one, and log out (end the session
 * the request came with). Behind `token:manage`, as the caller's tokens are: a
 * narrowly scoped token cannot see or end the user's sessions.
 */
import { z } from "@hono/zod-openapi";
import { clearSessionCookie, currentSessionId } from "../../shared/auth/session";
import { endSession, listSessions } from "../../shared/auth/session-store";
import { notFound } from "../../shared/http/errors";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { SessionSchema, sessionView } from "./schema";

const list = defineRoute({
  method: "get",
  path: "/auth/sessions",
  tags: ["Sessions"],
  summary: "The caller's live sessions",
  description: "Requires `token:manage`. Sessions that have not ended, oldest first (at most 200); `current` marks the one this request came with.",
  permission: "token:manage",
  responses: { 200: jsonResponse(z.object({ items: z.array(SessionSchema) }).openapi("SessionList"), "Sessions, oldest first") },
});

const revoke = defineRoute({
  method: "delete",
  path: "/auth/sessions/{id}",
  tags: ["Sessions"],
  summary: "End one of the caller's sessions",
  description: "Requires `token:manage`. Its cookie is refused (401) from the next request on. Another user's session id answers 404 like an unknown one.",
  permission: "token:manage",
  request: { params: z.object({ id: pathId("id") }) },
  responses: { 204: { description: "Ended" } },
});

const logout = defineRoute({
  method: "post",
  path: "/auth/logout",
  tags: ["Sessions"],
  summary: "Log out: end the session of this request's cookie and clear the cookie",
  description:
    "Any signed-in caller. With a bearer token there is no session to end: the answer is 204 all the same (revoke tokens with DELETE /api/tokens/{id}).",
  permission: "authenticated",
  responses: { 204: { description: "Logged out; the cookie is cleared" } },
});

export const sessionsRouter = createRouter()
  .openapi(list, async (c) => {
    const caller = callerOf(c);
    const rows = await listSessions(c.get("db"), caller.userId, c.get("clock")());
    const current = currentSessionId(c);
    c.header("cache-control", "no-store");
    return c.json({ items: rows.map((r) => sessionView(r, current)) }, 200);
  })
  .openapi(revoke, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await endSession(c.get("db"), callerOf(c).userId, id))) throw notFound("Session");
    if (id === currentSessionId(c)) clearSessionCookie(c);
    return c.body(null, 204);
  })
  .openapi(logout, async (c) => {
    const current = currentSessionId(c);
    if (current) await endSession(c.get("db"), callerOf(c).userId, current);
    clearSessionCookie(c);
    return c.body(null, 204);
  });
