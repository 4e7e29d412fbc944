/**
 * Authentication and authorization, declared per route. Every route states its
 * access: a permission tag, `authenticated` (any valid token) or `public`
 * (a token is optional; a bad one is still 401; the session cookie is ignored).
 * The caller comes from a bearer token or, without one, from the console's
 * session cookie (shared/auth/session.ts), which must pass the same-origin check
 * on state-changing methods.
 *
 * `runner`: the runner protocol (build servers). Only a runner token (`wsr_…`)
 * passes there, and a runner token passes nowhere else: every other route,
 * public ones included, answers it 403, so no route can forget to refuse it.
 */
import { and, eq } from "drizzle-orm";
import type { MiddlewareHandler, Next } from "hono";
import { deployments } from "../db/schema";
import { authenticate, authenticateSession, type AuthResult } from "../auth/authenticate";
import { holdsPersonalTag, type Tag } from "../auth/permissions";
import { clearingCookieHeader, markSessionCaller, readSessionCookie, sameOriginOrSafe } from "../auth/session";
import { LOG_STREAM_TOKEN_PREFIX } from "../auth/tokens";
import type { AppEnv, Caller, RouteServices } from "./context";
import { ApiError } from "./errors";
import { assertSafeQuery, isUnsafeText } from "./safe-text";

export type Access = Tag | "authenticated" | "public" | "runner";

const BEARER = /^Bearer ([\x21-\x7e]{16,512})$/;

/**
 * The only routes a deployment-session token may call (method and route pattern),
 * and only when `:id` is its project (`project`) or one of its project's
 * deployments (`deployment`). Future build-output routes opt in here.
 */
const SESSION_ROUTES = new Map<string, "project" | "deployment">([
  ["GET /api/projects/:id/deployments", "project"],
  ["GET /api/deployments/:id", "deployment"],
  ["GET /api/deployments/:id/logs", "deployment"],
  ["GET /api/deployments/:id/logs/stream", "deployment"],
  ["GET /api/projects/:id/logs", "project"],
  ["GET /api/projects/:id/logs/stream", "project"],
]);

/**
 * The only route a log-stream token may call, with `:id` its project. There (and
 * only there) the token may come in the `token` query parameter instead of the
 * Authorization header, because browsers' EventSource cannot send headers; a
 * token of any other kind in the query is refused, so long-lived tokens never
 * end up in URLs and access logs.
 */
const STREAM_ROUTES = new Set(["GET /api/projects/:id/server-logs/stream"]);

/** Whether `:id` names what a session of `projectId` may read on a route of that kind. */
async function sessionMayRead(
  c: Parameters<MiddlewareHandler<AppEnv>>[0],
  kind: "project" | "deployment" | undefined,
  projectId: string,
  orgId: string | null,
) {
  const id = c.req.param("id");
  if (kind === undefined || id === undefined) return false;
  if (kind === "project") return id === projectId;
  if (!orgId || isUnsafeText(id)) return false;
  const [row] = await c
    .get("db")
    .select({ projectId: deployments.projectId })
    .from(deployments)
    .where(and(eq(deployments.id, id), eq(deployments.orgId, orgId)));
  return row?.projectId === projectId;
}

type Ctx = Parameters<MiddlewareHandler<AppEnv>>[0];
/** What a middleware answers: the route's (or the cloud's) response, in time. */
type Outcome = ReturnType<MiddlewareHandler<AppEnv>>;

/** Hands over to the route once its query string is known to be safe text: the last check before every handler. */
function proceed(c: Ctx, next: Next): Promise<void> {
  assertSafeQuery(c);
  return next();
}

/** A cached token's caller comes back as is (not a promise), so the guard goes on without yielding. */
function tokenCaller(c: Ctx, header: string | undefined, queryToken: string | undefined, orgId: string | undefined): AuthResult | Promise<AuthResult> {
  const match = header ? BEARER.exec(header) : queryToken !== undefined ? BEARER.exec(`Bearer ${queryToken}`) : null;
  if (queryToken !== undefined && !queryToken.startsWith(LOG_STREAM_TOKEN_PREFIX)) {
    throw new ApiError("unauthorized", "Only a log-stream token (GET /api/projects/{id}/server-logs/stream-token) may be sent in the query");
  }
  if (!match) throw new ApiError("unauthorized", header ? "Malformed Authorization header" : "Missing bearer token");
  return authenticate(c.get("db"), match[1]!, orgId, c.get("clock")(), c.get("services").authCache);
}

/**
 * The session cookie's caller. A state-changing request must come from this app's
 * own origin (CSRF), checked before the session is even looked up; an ended or
 * expired session is 401 and its cookie is cleared.
 */
async function cookieCaller(c: Ctx, cookie: string, orgId: string | undefined): Promise<AuthResult> {
  if (!sameOriginOrSafe(c.req.method, c.req.header("origin"), c.req.url, c.get("config").publicUrl)) {
    throw new ApiError(
      "forbidden",
      "A state-changing request signed in by the session cookie must come from this app's own pages (its Origin header is missing or foreign); other clients use a bearer token",
    );
  }
  const result = await authenticateSession(c.get("db"), cookie, orgId, c.get("clock")());
  if (result.ok) {
    markSessionCaller(result.caller, result.sessionId);
    return result;
  }
  if (result.reason === "invalid") {
    throw new ApiError(
      "unauthorized",
      "The session has ended or expired; sign in again",
      {},
      { "set-cookie": clearingCookieHeader(c.req.url, c.get("config").publicUrl) },
    );
  }
  return result;
}

/**
 * `forward`: a per-project route that the cloud link may forward (see CloudService):
 * once the caller holds the permission here, a project living in the linked cloud
 * gets the cloud's answer instead of this instance's handler.
 */
export function guard(access: Access, forward?: { bodyLimit: number }): MiddlewareHandler<AppEnv> {
  // Not async: a request whose token is cached reaches the route without a step of its own (issue 25).
  return (c, next) => {
    const header = c.req.header("authorization");
    // Public routes ignore the session cookie: a stale one must not keep anyone from signing in.
    if (access === "public" && !header) return proceed(c, next);
    const queryToken = !header && STREAM_ROUTES.has(routeOf(c)) ? c.req.query("token") : undefined;
    // A bearer token (header, or the stream route's query) wins over the cookie.
    const cookie = !header && queryToken === undefined ? readSessionCookie(c) : undefined;
    // Routes under /api/orgs/:orgId act on the organization in the path.
    const orgParam = c.req.param("orgId") ?? c.req.header("x-organization-id");
    // An id Postgres cannot store names no organization: ask for one that cannot exist.
    const orgId = orgParam && isUnsafeText(orgParam) ? "-" : orgParam;
    const result = cookie !== undefined ? cookieCaller(c, cookie, orgId) : tokenCaller(c, header, queryToken, orgId);
    return result instanceof Promise ? result.then((r) => admit(c, next, access, forward, r)) : admit(c, next, access, forward, result);
  };
}

/** `GET /api/projects/:id`: built only where it is needed (no header, or a session token), as it allocates. */
const routeOf = (c: Ctx) => `${c.req.method} ${c.req.routePath}`;

/** The caller is known: checks what it may do here, then hands over to the route (or the cloud). */
function admit(c: Ctx, next: Next, access: Access, forward: { bodyLimit: number } | undefined, result: AuthResult): Outcome {
  if (!result.ok) {
    if (result.reason === "not_member") throw new ApiError("forbidden", "You are not a member of this organization");
    throw new ApiError("unauthorized", "Invalid, expired or revoked token");
  }
  if ("runner" in result) {
    if (access !== "runner") {
      throw new ApiError("forbidden", "A runner token (wsr_…) only works on the runner protocol (/api/runner/…); use a personal access token here");
    }
    c.set("runner", result.runner);
    return proceed(c, next);
  }
  if (access === "runner") throw new ApiError("forbidden", "The runner protocol takes a build server's runner token (wsr_…) only");
  if (result.caller.session) return admitSession(c, next, access, result.caller as SessionCaller);
  c.set("caller", result.caller);
  checkPermission(access, result.caller);
  const cloud = forward && result.caller.orgId ? c.get("services").cloud : undefined;
  return cloud ? forwardOrProceed(c, next, cloud, forward!.bodyLimit) : proceed(c, next);
}

/** What a user's token (not a runner's) may be asked for. */
type UserAccess = Exclude<Access, "runner">;
type SessionCaller = Caller & { session: NonNullable<Caller["session"]> };

/** A project-pinned token (deployment session, log stream): only on its routes, only for its project. Never forwarded. */
async function admitSession(c: Ctx, next: Next, access: UserAccess, caller: SessionCaller): Outcome {
  const { session } = caller;
  if (session.kind === "deployment_session" && !(await sessionMayRead(c, SESSION_ROUTES.get(routeOf(c)), session.projectId, caller.orgId))) {
    throw new ApiError("forbidden", "A deployment-session token may only read its own project's deployments");
  }
  if (session.kind === "log_stream" && !(STREAM_ROUTES.has(routeOf(c)) && c.req.param("id") === session.projectId)) {
    throw new ApiError("forbidden", "A log-stream token may only open its own project's server-log stream");
  }
  c.set("caller", caller);
  checkPermission(access, caller);
  return proceed(c, next);
}

function checkPermission(access: UserAccess, caller: Caller): void {
  if (access === "public" || access === "authenticated" || holdsPersonalTag(caller.scopes, access)) return;
  if (!caller.orgId) throw new ApiError("forbidden", "No active organization; send X-Organization-Id");
  if (!caller.tags.includes(access)) throw new ApiError("forbidden", `Missing permission '${access}'`);
}

/** A per-project route of a project living in the linked cloud gets the cloud's answer (CloudService.forward). */
async function forwardOrProceed(c: Ctx, next: Next, cloud: NonNullable<RouteServices["cloud"]>, bodyLimit: number): Outcome {
  const forwarded = await cloud.forward(c, bodyLimit);
  return forwarded ?? proceed(c, next);
}
