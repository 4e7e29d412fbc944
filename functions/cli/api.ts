/**
 * The CLI's HTTP client: JSON calls to the API with the bearer token (and the
 * active organization), problem+json answers turned into one clear error line.
 */
export class CliError extends Error {}

export interface Client {
  /** The API base URL (`{base_url}`; a trailing `/api` is accepted too). */
  api: string;
  token: string;
  org?: string;
}

/** The base URL without a trailing slash or `/api`. */
export function apiBase(api: string): string {
  const url = new URL(api);
  url.pathname = url.pathname.replace(/\/+$/, "").replace(/\/api$/, "");
  return url.toString().replace(/\/+$/, "");
}

export const reasonOf = (e: unknown) => (e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e));

export interface CallOptions {
  body?: unknown;
  /** Another bearer token than the client's (a deployment session). */
  token?: string;
  timeoutMs?: number;
}

export async function call<T>(
  client: Client,
  method: "GET" | "POST" | "PATCH" | "DELETE",
  path: string,
  opts: CallOptions = {},
): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.token ?? client.token}`, accept: "application/json" };
  if (client.org) headers["x-organization-id"] = client.org;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${apiBase(client.api)}${path}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 120_000),
  }).catch((e) => {
    throw new CliError(`${method} ${path}: ${reasonOf(e)}`);
  });
  const text = await res.text();
  let parsed: { detail?: string; title?: string; field?: string } | undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const field = parsed?.field ? ` (${parsed.field})` : "";
    const retry = res.status === 429 && res.headers.get("retry-after") ? ` (retry in ${res.headers.get("retry-after")} s)` : "";
    throw new ApiCallError(res.status, `${method} ${path}: ${res.status} ${parsed?.detail ?? parsed?.title ?? text.slice(0, 200)}${field}${retry}`);
  }
  if (parsed === undefined && text) throw new CliError(`${method} ${path}: the answer is not JSON`);
  return { status: res.status, body: parsed as T };
}

export class ApiCallError extends CliError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Checks the token before any work (GET /api/me, 10 s at most): a wrong token
 * fails at once with a clear line. Returns the active organization.
 */
export async function checkToken(client: Client): Promise<{ orgId: string }> {
  try {
    const { body } = await call<{ activeOrganizationId: string }>(client, "GET", "/api/me", { timeoutMs: 10_000 });
    return { orgId: body.activeOrganizationId };
  } catch (e) {
    if (e instanceof ApiCallError && e.status === 401) {
      throw new CliError(`The API at ${apiBase(client.api)} refused the token (401): check --token or WORKSPACE_TOKEN`);
    }
    if (e instanceof ApiCallError && (e.status === 403 || e.status === 404) && client.org) {
      throw new CliError(`The token cannot act in organization ${client.org} (${e.message})`);
    }
    throw e;
  }
}

/** A project id (`prj_…`), or else a name or slug looked up in the organization's project list. */
export async function resolveProject(client: Client, ref: string): Promise<{ id: string; name: string }> {
  if (/^prj_[0-9a-z]+$/.test(ref)) {
    const { body } = await call<{ id: string; name: string }>(client, "GET", `/api/projects/${ref}`);
    return body;
  }
  const wanted = ref.toLowerCase();
  const found: Array<{ id: string; name: string; slug: string }> = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = `/api/projects?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const { body } = await call<{ items: Array<{ id: string; name: string; slug: string }>; nextCursor: string | null }>(client, "GET", query);
    found.push(...body.items.filter((p) => p.slug === ref || p.name.toLowerCase() === wanted));
    cursor = body.nextCursor;
  } while (cursor && ++pages < 100);
  if (found.length === 0) throw new CliError(`No project named ${JSON.stringify(ref)} (by id, name or slug)`);
  const bySlug = found.find((p) => p.slug === ref);
  if (bySlug) return bySlug;
  if (found.length > 1) throw new CliError(`${found.length} projects are named ${JSON.stringify(ref)}: use the id (${found.map((p) => p.id).join(", ")})`);
  return found[0]!;
}
