/**
 * A project's connected domains: GET /api/projects/{id}/domains lists them with
 * their routing state, DELETE /api/projects/{id}/domains/{domain} removes one
 * (POST /api/projects/{id}/connect adds them, connect.ts).
 */
import { z } from "@hono/zod-openapi";
import { ROUTING_STATES } from "../../shared/db/schema";
import type { AppContext } from "../../shared/http/context";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { normalizeHostname } from "./connect";
import { type DomainRow, listDomains, removeDomain } from "./domains-store";
import { FreeRouteSchema, ProjectIdParam } from "./schema";
import { findProject, freeRoute, type ProjectRow } from "./store";
import { withAudit } from "../operations/audit/record";

const TAGS = ["Projects"];

const ROUTING_DOC =
  "`synced`: this instance's edge routes the hostname to the project now (self-hosted; checked on every read, after reloading the project's routes); `pending`: not routed (self-hosted: not in the edge's route table yet; on the cloud every domain reads `pending`: the Worker records domains but provisions no DNS, certificate or edge route for them yet); `offline`: the project is disabled, so nothing is routed.";

const DomainRoutingSchema = z
  .object({
    state: z.enum(ROUTING_STATES).openapi({ description: ROUTING_DOC }),
    checkedAt: z
      .string()
      .nullable()
      .openapi({ description: "When the edge was asked (this read); null when no edge was asked (the cloud, or a disabled project)" }),
  })
  .openapi("DomainRouting");

const ConnectedDomainSchema = z
  .object({
    hostname: z.string().openapi({ description: "Lower-case, no trailing dot" }),
    primary: z.boolean().openapi({ description: "At most one domain of a project is primary; the latest connected, or after a removal the oldest left" }),
    createdAt: z.string(),
    routing: DomainRoutingSchema,
  })
  .openapi("ConnectedDomain");

const DomainListSchema = z
  .object({
    free: FreeRouteSchema.openapi({
      description: "The free route `<slug>.<shared domain>`, as the project read shows it (its state is recorded by enable and routing/retry)",
    }),
    items: z.array(ConnectedDomainSchema).openapi({ description: "Connected domains: the primary first, then oldest first (at most 50)" }),
  })
  .openapi("ProjectDomainList");

const DomainParams = ProjectIdParam.extend({
  domain: pathId("domain", "A connected hostname; any case, a trailing dot ignored"),
});

const list = defineRoute({
  method: "get",
  path: "/projects/{id}/domains",
  tags: TAGS,
  summary: "List the project's domains and their routing state",
  description: `The free route (\`free\`, separately) and the connected domains (\`items\`, the primary first, then oldest first), each with its routing state. ${ROUTING_DOC}`,
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(DomainListSchema, "The project's domains") },
});

const remove = defineRoute({
  method: "delete",
  path: "/projects/{id}/domains/{domain}",
  tags: TAGS,
  summary: "Remove a connected domain",
  description:
    "Removes the hostname (matched case-insensitively, a trailing dot ignored) from the project. Removing the primary domain makes the oldest remaining one primary, or leaves none. A hostname that is not one of this project's domains (unknown, or another project's) is 404 and changes nothing. On a self-hosted instance the edge stops serving it as soon as the removal commits.",
  permission: "project:write",
  request: { params: DomainParams },
  responses: { 204: { description: "Removed" } },
});

/** Each domain's routing state: asked of the edge (self-hosted; one reload of the project's routes serves every question), else pending. */
async function routingOf(c: AppContext, project: ProjectRow, rows: DomainRow[]) {
  if (project.disabledAt) return rows.map(() => ({ state: "offline" as const, checkedAt: null }));
  const edge = c.get("services").edgeRoutes;
  if (!edge) return rows.map(() => ({ state: "pending" as const, checkedAt: null }));
  const checkedAt = c.get("clock")().toISOString();
  const served = await Promise.all(rows.map((d) => edge.serves(project.id, d.hostname)));
  return served.map((s) => ({ state: s ? ("synced" as const) : ("pending" as const), checkedAt }));
}

export const domainsRouter = createRouter()
  .openapi(list, async (c) => {
    const project = await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    const rows = await listDomains(c.get("db"), project.id);
    const routing = await routingOf(c, project, rows);
    const items = rows.map((d, i) => ({ hostname: d.hostname, primary: d.isPrimary, createdAt: d.createdAt.toISOString(), routing: routing[i]! }));
    return c.json({ free: freeRoute(project, c.get("config")), items }, 200);
  })
  .openapi(remove, async (c) => {
    const { id, domain } = c.req.valid("param");
    const hostname = normalizeHostname(domain);
    // Longer than any hostname: matches nothing (the domain's 404, after the project's).
    await withAudit(
      c,
      (tx) => removeDomain(tx, callerOf(c).orgId, id, hostname.length > 254 ? "" : hostname),
      () => ({ action: "domain.removed", target: { kind: "project", id }, details: { domain: hostname } }),
    );
    return c.body(null, 204);
  });
