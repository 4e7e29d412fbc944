/**
 * The cloud link's part in requests on a self-hosted instance:
 * - forwarding: a per-project route called with the id of a project that lives in
 *   the linked cloud (a cloud project seen in the home feed, or a local project
 *   transferred there) is sent to the cloud with the link's token and cloud
 *   organization, and the cloud's answer comes back unchanged: status, body and
 *   streams (SSE passes through as it arrives). The caller's permission was
 *   checked here first (guard.ts); the cloud checks the link token's.
 *   Recognising a cloud project costs one indexed query in this instance's
 *   database, never a round trip to the cloud.
 * - the cloud half of the home feed: one page of the cloud organization's
 *   projects, whose ids are remembered for forwarding.
 */
import type { Context } from "hono";
import type { Keyring } from "../../shared/crypto/keyring";
import type { Db } from "../../shared/db/types";
import type { AppEnv, CloudProjectsPage, CloudService } from "../../shared/http/context";
import { ApiError } from "../../shared/http/errors";
import { readBodyBytes } from "../../shared/http/json-body";
import { callerOf } from "../../shared/http/router";
import { isUnsafeText } from "../../shared/http/safe-text";
import { ProjectSchema } from "../projects/schema";
import { CLOUD_TIMEOUT_MS, CloudRefused, CloudUnreachable, cloudFetch, cloudJson } from "./client";
import { cloudTargetOf, forgetCloudProject, rememberCloudProjects, returnedCloudIds } from "./link-store";
import { linkCredentials } from "./link-service";

/** The home feed waits this long for the cloud's page, then shows the local projects with `reachable: false` (a page should not hang on a slow cloud). */
export const HOME_TIMEOUT_MS = 5_000;

/** Request headers that carry meaning to the cloud's route; everything else (cookies, the caller's token, hop-by-hop) stays here. */
const FORWARDED_REQUEST_HEADERS = ["accept", "content-type", "last-event-id", "if-none-match"];
/** Answer headers returned to the caller; the cloud's own request id comes back as x-cloud-request-id. */
const RETURNED_HEADERS = [
  "content-type",
  "cache-control",
  "retry-after",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "ratelimit-policy",
  "etag",
];

/** The API's own answer types pass; anything else (HTML, a script) comes back as opaque bytes. */
const API_TYPES = /^(application\/json|application\/problem\+json|text\/event-stream)(;|$)/i;
const answerType = (type: string) => (API_TYPES.test(type.trim()) ? type : "application/octet-stream");

/** `/api/projects/:id/domains/:domain` with each parameter's value, encoded: the path to call on the cloud. */
export function forwardedPath(routePath: string, param: (name: string) => string): string {
  return routePath
    .replace(/^\//, "")
    .split("/")
    .map((segment) => (segment.startsWith(":") ? encodeURIComponent(param(segment.slice(1).replace(/\{.*\}$/, ""))) : segment))
    .join("/");
}

export function createCloudService(deps: { db: Db; keyring: Keyring; beforeTransferStep?: CloudService["beforeTransferStep"] }): CloudService {
  const { db, keyring } = deps;

  async function forward(c: Context<AppEnv>, bodyLimit: number): Promise<Response | undefined> {
    const { orgId } = callerOf(c);
    const id = c.req.param("id");
    if (!id || isUnsafeText(id)) return undefined;
    const target = await cloudTargetOf(db, orgId, id);
    if (!target) return undefined;
    const link = await linkCredentials(db, keyring, orgId);
    if (!link) {
      throw new ApiError("conflict", "This project lives in the cloud and this organization is no longer linked to it; link it again with PUT /api/cloud/link");
    }
    // The cloud's path is rebuilt from the matched route and its decoded parameters, never from the raw path:
    // however the caller encoded it, the cloud gets the same route the permission was checked for.
    const path = `${forwardedPath(c.req.routePath, (name) => (name === "id" ? target : (c.req.param(name) ?? "")))}${new URL(c.req.url).search}`;
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = c.req.header(name);
      if (value !== undefined) headers[name] = value;
    }
    const method = c.req.method;
    const body = method === "GET" || method === "HEAD" ? undefined : await readBodyBytes(c.req.raw, bodyLimit);
    // The cloud must start answering within CLOUD_TIMEOUT_MS; a stream may then last as long as the caller stays.
    const started = new AbortController();
    const timer = setTimeout(() => started.abort(new DOMException("timeout", "TimeoutError")), CLOUD_TIMEOUT_MS);
    let res: Response;
    try {
      res = await cloudFetch(link, path, { method, headers, body, signal: AbortSignal.any([c.req.raw.signal, started.signal]) });
    } catch (e) {
      if (e instanceof CloudUnreachable) throw new ApiError("bad_gateway", `This project lives in the cloud, which could not be reached: ${e.message}`);
      throw e;
    } finally {
      clearTimeout(timer);
    }
    if (res.status === 404 && (await goneFromCloud(link, target))) await forgetCloudProject(db, orgId, target);
    // A new Response drops the headers set on `c` so far: keep this instance's request id (its request line names it).
    const answer = new Headers({
      "x-project-location": "cloud",
      "x-request-id": c.get("requestId"),
      // The answer is served from this origin (the console's): the cloud cannot make it a page or a script here.
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'none'; sandbox",
    });
    for (const name of RETURNED_HEADERS) {
      const value = res.headers.get(name);
      if (value !== null) answer.set(name, value);
    }
    const type = res.headers.get("content-type");
    if (type !== null) answer.set("content-type", answerType(type));
    const cloudRequestId = res.headers.get("x-request-id");
    if (cloudRequestId) answer.set("x-cloud-request-id", cloudRequestId);
    return new Response(res.body, { status: res.status, headers: answer });
  }

  /** A 404 from a sub-route (a domain, a rule) is not the project's: only forget it when the cloud says the project itself is gone. */
  async function goneFromCloud(link: Parameters<typeof cloudJson>[0], target: string): Promise<boolean> {
    try {
      await cloudJson(link, `api/projects/${encodeURIComponent(target)}`);
      return false;
    } catch (e) {
      return e instanceof CloudRefused && e.status === 404;
    }
  }

  async function projects(c: Context<AppEnv>, limit: number, cursor?: string): Promise<CloudProjectsPage | undefined> {
    const { orgId } = callerOf(c);
    const link = await linkCredentials(db, keyring, orgId);
    if (!link) return undefined;
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    let page: { items?: unknown; nextCursor?: unknown };
    try {
      page = await cloudJson(link, `api/projects?${query}`, { timeoutMs: HOME_TIMEOUT_MS });
    } catch (e) {
      if (e instanceof CloudUnreachable) return { reachable: false, reason: e.message };
      if (e instanceof CloudRefused && e.status === 401)
        return { reachable: false, reason: "the cloud refused the link's token (expired or revoked): link again" };
      if (e instanceof CloudRefused) return { reachable: false, reason: `the cloud answered ${e.status}: ${e.message}` };
      throw e;
    }
    const items = Array.isArray(page?.items) ? page.items.map((item) => ProjectSchema.safeParse(item)) : undefined;
    if (!items || items.some((r) => !r.success) || !(page.nextCursor === null || typeof page.nextCursor === "string")) {
      return { reachable: false, reason: "the cloud answered with a project list this instance cannot read" };
    }
    const parsed = items.map((r) => r.data!);
    const recorded = await rememberCloudProjects(db, orgId, parsed, c.get("clock")());
    const returned = await returnedCloudIds(
      db,
      orgId,
      parsed.map((p) => p.id),
    );
    return { reachable: true, items: parsed.filter((p) => recorded.has(p.id) && !returned.has(p.id)), nextCursor: page.nextCursor as string | null };
  }

  return { forward, projects, beforeTransferStep: deps.beforeTransferStep };
}
