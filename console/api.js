// @ts-check
/**
 * The console's only way to the server: the public API under /api, authenticated by the
 * session cookie (same-origin credentials). State-changing calls send JSON; the browser adds
 * `Origin`, which the API's same-origin check requires of every cookie-borne change.
 */

/**
 * An RFC 9457 problem as the API sends it (`field` names the input at fault).
 * @typedef {{type?: string, title?: string, status: number, detail?: string, field?: string, allowed?: unknown, requestId?: string}} Problem
 */

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {Problem} problem
   */
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

const ORG_KEY = "wsp.organizationId";

/** The organization chosen in the switcher (sent as X-Organization-Id), or null for the default. */
export function activeOrganization() {
  try {
    return localStorage.getItem(ORG_KEY);
  } catch {
    return null;
  }
}

/** @param {string | null} id */
export function rememberOrganization(id) {
  try {
    if (id) localStorage.setItem(ORG_KEY, id);
    else localStorage.removeItem(ORG_KEY);
  } catch {
    // Storage refused (private mode): the choice lasts until the page is reloaded.
  }
}

/** @type {() => void} */
let onSignedOut = () => {};

/** Called when a call answers 401 (the session ended or expired). @param {() => void} handler */
export function onSessionEnded(handler) {
  onSignedOut = handler;
}

/**
 * Calls the API. Resolves to the parsed JSON body (undefined when empty); rejects with ApiError.
 * @param {"GET" | "POST" | "PATCH" | "PUT" | "DELETE"} method
 * @param {string} path after /api, e.g. `/projects/home`
 * @param {unknown} [body] sent as JSON
 * @returns {Promise<any>}
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: "application/json" };
  const org = activeOrganization();
  if (org) headers["x-organization-id"] = org;
  if (body !== undefined) headers["content-type"] = "application/json";
  let res;
  try {
    res = await fetch(`/api${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  } catch {
    throw new ApiError(0, { status: 0, title: "Network error", detail: "The server could not be reached. Check the connection and try again." });
  }
  const text = await res.text();
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const problem = data && typeof data === "object" ? /** @type {Problem} */ (data) : { status: res.status, title: res.statusText };
    if (res.status === 401 && !path.startsWith("/auth/")) onSignedOut();
    throw new ApiError(res.status, problem);
  }
  return data;
}
