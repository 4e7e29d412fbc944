/**
 * Cookie sessions of the browser console: the cookie's name and attributes, the
 * lifetimes, the same-origin rule for state-changing requests (CSRF), and which
 * session authenticated a request.
 *
 * The cookie value is `wss_` + 256 random bits; only its SHA-256 is stored. On an
 * HTTPS origin (or any origin that is not plain-HTTP loopback) the cookie is
 * `__Host-wsp_session; Secure`: the browser then refuses it from a sibling
 * subdomain or a plain-HTTP page, so no one can plant a session of their own
 * (login CSRF). On `http://127.0.0.1`, `localhost` or `[::1]` a Secure cookie
 * would not come back over plain HTTP in every browser, so it is `wsp_session`
 * without `Secure`; each kind of origin reads only its own name.
 *
 * The origin is PUBLIC_URL's when it is set, else the request URL's: behind a
 * reverse proxy that rewrites Host to 127.0.0.1:PORT the request URL is plain
 * loopback while the browser is on the HTTPS site, and the cookie must still be
 * `__Host-…; Secure` there.
 */
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { AppEnv, Caller } from "../http/context";
import { generateToken } from "./tokens";

export const SESSION_SECRET_PREFIX = "wss_";
/** A session unused this long ends (its use refreshes it at most once a minute). */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** Last-seen is written at most this often. */
export const SESSION_TOUCH_MS = 60 * 1000;
/** A session ends this long after sign-in, used or not. */
export const SESSION_ABSOLUTE_MS = 7 * 24 * 60 * 60 * 1000;

const NAME = "wsp_session";
const SECURE_NAME = `__Host-${NAME}`;
const COOKIE_VALUE = /^wss_[A-Za-z0-9_-]{43}$/;

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** Plain-HTTP loopback: the one kind of origin where the cookie is not `Secure` (and so cannot be `__Host-`). */
export function isPlainLoopback(url: URL): boolean {
  return url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname);
}

/** The origin the cookie is for: PUBLIC_URL when set (the browser's origin behind a proxy), else the request's. */
function cookieOrigin(requestUrl: string, publicUrl: string | undefined): URL {
  return new URL(publicUrl ?? requestUrl);
}

/** The cookie's name for the origin the request came to (PUBLIC_URL's when set). */
export function sessionCookieName(requestUrl: string, publicUrl?: string): string {
  return isPlainLoopback(cookieOrigin(requestUrl, publicUrl)) ? NAME : SECURE_NAME;
}

export function newSessionSecret(): string {
  return generateToken(SESSION_SECRET_PREFIX);
}

/** The session cookie's value, if the request carries a well-formed one under this origin's name. */
export function readSessionCookie(c: Context<AppEnv>): string | undefined {
  if (!c.req.header("cookie")) return undefined;
  const value = getCookie(c, sessionCookieName(c.req.url, c.get("config")?.publicUrl));
  return value && COOKIE_VALUE.test(value) ? value : undefined;
}

function attributes(c: Context<AppEnv>) {
  const secure = !isPlainLoopback(cookieOrigin(c.req.url, c.get("config")?.publicUrl));
  return { name: secure ? SECURE_NAME : NAME, secure };
}

/** Sets the cookie; it lives until the session's absolute expiry (the idle expiry is the server's to enforce). */
export function setSessionCookie(c: Context<AppEnv>, secret: string, expiresAt: Date, now: Date): void {
  const { name, secure } = attributes(c);
  const maxAge = Math.max(0, Math.floor((expiresAt.getTime() - now.getTime()) / 1000));
  setCookie(c, name, secret, { path: "/", httpOnly: true, sameSite: "Lax", secure, maxAge });
}

export function clearSessionCookie(c: Context<AppEnv>): void {
  const { name, secure } = attributes(c);
  deleteCookie(c, name, { path: "/", httpOnly: true, sameSite: "Lax", secure });
}

/** The `Set-Cookie` value that clears the cookie, for an error answer (the guard's 401); pass PUBLIC_URL when set. */
export function clearingCookieHeader(requestUrl: string, publicUrl?: string): string {
  const secure = !isPlainLoopback(cookieOrigin(requestUrl, publicUrl));
  return `${secure ? SECURE_NAME : NAME}=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Whether a cookie-authenticated request may go ahead: safe methods always; any
 * other only when `Origin` is this app's own (the request URL's origin, or
 * PUBLIC_URL's behind a proxy). A missing Origin is refused: browsers send it on
 * every cross-site and every non-GET fetch, so only a non-browser client lacks
 * it, and that one should use a bearer token.
 */
export function sameOriginOrSafe(method: string, origin: string | undefined, requestUrl: string, publicUrl: string | undefined): boolean {
  if (SAFE_METHODS.has(method)) return true;
  if (!origin) return false;
  if (origin === new URL(requestUrl).origin) return true;
  return publicUrl !== undefined && origin === new URL(publicUrl).origin;
}

/** The session behind a cookie-authenticated caller (set by the guard; absent for a bearer token). */
const sessionsOfCallers = new WeakMap<Caller, string>();

export function markSessionCaller(caller: Caller, sessionId: string): void {
  sessionsOfCallers.set(caller, sessionId);
}

/** The id of the session the request was authenticated with, if it came with the cookie. */
export function currentSessionId(c: Context<AppEnv>): string | undefined {
  const caller = c.get("caller");
  return caller ? sessionsOfCallers.get(caller) : undefined;
}
