/**
 * POST /api/projects/:id/connect: adds a custom domain and makes it the primary
 * one in one call. A hostname belongs to one project across the deployment. The
 * full lifecycle (DNS preview, verification, TLS) belongs to the domains API.
 */
import { z } from "@hono/zod-openapi";
import type { ServiceConfig } from "../../shared/http/context";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { connectDomain, MAX_DOMAINS } from "./domains-store";
import { withAudit } from "../operations/audit/record";
import { ProjectIdParam, ProjectSchema } from "./schema";
import { projectView } from "./store";

/** Lower-cased, without a trailing dot. */
export const normalizeHostname = (h: string) => h.trim().toLowerCase().replace(/\.$/, "");

/** A public DNS name: 2+ labels of letters, digits and inner hyphens, an alphabetic top-level label (so no IP addresses). */
function isHostname(h: string): boolean {
  if (h.length < 1 || h.length > 253) return false;
  const labels = h.split(".");
  if (labels.length < 2) return false;
  if (!labels.every((l) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l))) return false;
  return /^(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/.test(labels[labels.length - 1]!);
}

export const Hostname = z
  .string()
  .max(254)
  .transform(normalizeHostname)
  .refine(isHostname, "must be a hostname such as app.example.com (ASCII or punycode, no scheme, port, path or wildcard)")
  .openapi({ type: "string", description: "A hostname such as `app.example.com`; lower-cased, a trailing dot dropped" });

const route = defineRoute({
  method: "post",
  path: "/projects/{id}/connect",
  tags: ["Projects"],
  summary: "Add a custom domain and mark it primary",
  description: `\`domain\`: a hostname (lower-cased, a trailing dot dropped). It is added and becomes the primary domain; an earlier primary stays, no longer primary. Connecting it again to the same project is harmless (it becomes primary again). A hostname connected to another project, in any organization, is 409. Hosts under the shared domain are free routes and cannot be connected (400); neither can the API's own names (400): on the self-hosted server PUBLIC_URL's host and API_HOSTS (configuration, whatever Host this request used), and the host this request is sent to, since the edge would send API traffic to the app. At most ${MAX_DOMAINS} domains per project (409).`,
  permission: "project:write",
  request: { params: ProjectIdParam, body: jsonRequest(z.strictObject({ domain: Hostname })) },
  responses: {
    200: jsonResponse(ProjectSchema, "The project with its domains"),
    409: { description: "The domain belongs to another project, or the project has too many domains" },
  },
});

/** The hostname of a URL, lower-cased and without a trailing dot; undefined when unset or not a URL. */
function hostOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return normalizeHostname(new URL(url).hostname);
  } catch {
    return undefined;
  }
}

/**
 * Why `domain` cannot be connected, if it cannot: hosts under the shared domain
 * are free routes, and the API's own names (configured: PUBLIC_URL's and
 * API_HOSTS; and the one this request came to) stay the API's: a project
 * domain equal to one would make the edge send API traffic, bearer tokens
 * included, to an app.
 */
export function reservedHostReason(domain: string, config: ServiceConfig, requestUrl: string): string | undefined {
  const shared = normalizeHostname(config.sharedDomain);
  if (domain === shared || domain.endsWith(`.${shared}`)) return `Hosts under ${shared} are free routes and cannot be connected`;
  if (domain === hostOf(config.publicUrl) || config.apiHosts?.includes(domain))
    return `${domain} is this instance's own host (PUBLIC_URL or API_HOSTS) and cannot be connected`;
  if (domain === hostOf(requestUrl)) return `${domain} is the host this API is reached at and cannot be connected`;
  return undefined;
}

export const connectRouter = createRouter().openapi(route, async (c) => {
  const { orgId } = callerOf(c);
  const { domain } = c.req.valid("json");
  const refused = reservedHostReason(domain, c.get("config"), c.req.url);
  if (refused) throw badRequest("domain", refused);
  const row = await withAudit(
    c,
    (tx) => connectDomain(tx, orgId, c.req.valid("param").id, domain),
    (row) => ({ action: "domain.added", target: { kind: "project", id: row.id }, details: { domain } }),
  );
  return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
});
