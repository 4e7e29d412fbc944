/**
 * Route rules (self-hosted): what the edge checks before a request reaches the
 * project's app. Mounted only by the Node adapter; on the cloud these paths are
 * unknown routes (404).
 *
 * Evaluation order (documented in the OpenAPI description): enabled rules whose
 * path matches, bans first (403), then allow-deny (403), then rate limits (429);
 * within a kind, creation order; the first rule that refuses decides.
 */
import { z } from "@hono/zod-openapi";
import type { RouteRuleConfig, RouteRuleKind } from "../../shared/db/schema";
import { badRequest } from "../../shared/http/errors";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { findProject } from "../projects/store";
import { type CreateRule, CreateRuleBody, KIND_FIELDS, MAX_CIDRS, MAX_RULES_PER_PROJECT, RouteRuleSchema, type RouteRuleView, UpdateRuleBody } from "./schema";
import { deleteRule, insertRule, listRules, type RouteRuleRow, updateRule } from "./store";
import { withAudit } from "../operations/audit/record";

const TAGS = ["Route rules (self-hosted)"];
const ProjectParam = z.object({ id: pathId("id", "The project id (`prj_…`)") });
const RuleParams = z.object({ id: pathId("id", "The project id (`prj_…`)"), ruleId: pathId("ruleId", "The rule id (`rr_…`)") });

const ORDER = [
  "Evaluated by the self-hosted edge for every request to the project's hostnames, before the app sees it:",
  "only enabled rules whose `path` matches the request path (query excluded); bans first (403), then allow-deny rules (403), then rate limits (429 with `Retry-After` and `RateLimit-Limit`/`RateLimit-Remaining`/`RateLimit-Reset`);",
  "within a kind in creation order; the first rule that refuses decides. An expired ban no longer applies.",
  "The client address is the connection's, or the `X-Forwarded-For` entry before the first trusted proxy when `TRUSTED_PROXIES` lists the connecting address.",
  `At most ${MAX_RULES_PER_PROJECT} rules per project (409 beyond), ${MAX_CIDRS} blocks per allow-deny rule.`,
  "Self-hosted only: on the cloud these routes do not exist (404).",
].join(" ");

function view(r: RouteRuleRow): RouteRuleView {
  return {
    id: r.id,
    projectId: r.projectId,
    kind: r.kind,
    path: r.path,
    enabled: r.enabled,
    ...r.config,
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
  };
}

function configOf(body: CreateRule): RouteRuleConfig {
  switch (body.kind) {
    case "rate-limit":
      return { limit: body.limit, windowSeconds: body.windowSeconds, by: body.by };
    case "ban":
      return { cidr: body.cidr, expiresAt: body.expiresAt ?? null, reason: body.reason ?? null };
    case "allow-deny":
      return { mode: body.mode, cidrs: body.cidrs };
  }
}

const list = defineRoute({
  method: "get",
  path: "/projects/{id}/route-rules",
  tags: TAGS,
  summary: "List the project's route rules",
  description: `Every rule of the project (at most ${MAX_RULES_PER_PROJECT}, so one answer, no paging), in creation order. ${ORDER}`,
  permission: "project:read",
  selfHostedOnly: true,
  request: { params: ProjectParam },
  responses: { 200: jsonResponse(z.object({ items: z.array(RouteRuleSchema) }).openapi("RouteRuleList"), "The rules") },
});

const create = defineRoute({
  method: "post",
  path: "/projects/{id}/route-rules",
  tags: TAGS,
  summary: "Add a route rule",
  description: `\`kind\` is \`rate-limit\` ({limit ≥ 1, windowSeconds, by: "ip"}), \`ban\` ({cidr, expiresAt?, reason?}) or \`allow-deny\` ({mode: "allow" | "deny", cidrs}); each takes an optional \`path\` and \`enabled\` (default true). A bad CIDR, a limit ≤ 0 or an unknown kind is 400 naming the field. ${ORDER}`,
  permission: "project:write",
  selfHostedOnly: true,
  request: { params: ProjectParam, body: jsonRequest(CreateRuleBody) },
  responses: { 201: jsonResponse(RouteRuleSchema, "The new rule"), 409: { description: `The project already has ${MAX_RULES_PER_PROJECT} rules` } },
});

const update = defineRoute({
  method: "patch",
  path: "/projects/{id}/route-rules/{ruleId}",
  tags: TAGS,
  summary: "Change a route rule",
  description:
    "Sets the given fields: `path`, `enabled`, and the fields of the rule's own kind (a field of another kind is 400 naming it; the kind cannot change: delete and add instead). `path: null` makes the rule apply to every path; `expiresAt: null` makes a ban permanent.",
  permission: "project:write",
  selfHostedOnly: true,
  request: { params: RuleParams, body: jsonRequest(UpdateRuleBody) },
  responses: { 200: jsonResponse(RouteRuleSchema, "The rule as changed") },
});

const remove = defineRoute({
  method: "delete",
  path: "/projects/{id}/route-rules/{ruleId}",
  tags: TAGS,
  summary: "Delete a route rule",
  description: "The edge stops applying it within a second.",
  permission: "project:write",
  selfHostedOnly: true,
  request: { params: RuleParams },
  responses: { 204: { description: "Deleted" } },
});

/** The rule's settings with a PATCH applied; a field that is not the kind's is a 400 naming it. */
function patched(kind: RouteRuleKind, config: RouteRuleConfig, patch: z.infer<typeof UpdateRuleBody>): RouteRuleConfig {
  const own = KIND_FIELDS[kind];
  const next: Record<string, unknown> = { ...config };
  for (const [field, value] of Object.entries(patch)) {
    if (field === "path" || field === "enabled" || value === undefined) continue;
    if (!own.includes(field)) throw badRequest(field, `is not a field of a ${kind} rule (its fields: ${own.join(", ")}, path, enabled)`);
    next[field] = value;
  }
  return next as RouteRuleConfig;
}

export const routeRulesRouter = createRouter()
  .openapi(list, async (c) => {
    const { orgId } = callerOf(c);
    const project = await findProject(c.get("db"), orgId, c.req.valid("param").id);
    const rows = await listRules(c.get("db"), orgId, project.id);
    return c.json({ items: rows.map(view) }, 200);
  })
  .openapi(create, async (c) => {
    const body = c.req.valid("json");
    const row = await withAudit(
      c,
      (tx) =>
        insertRule(
          tx,
          callerOf(c).orgId,
          c.req.valid("param").id,
          { kind: body.kind, path: body.path ?? null, enabled: body.enabled ?? true, config: configOf(body) },
          c.get("clock")(),
        ),
      (row) => ({ action: "route_rules.changed", target: { kind: "route_rule", id: row.id }, details: { change: "added", kind: row.kind } }),
    );
    return c.json(view(row), 201);
  })
  .openapi(update, async (c) => {
    const { id, ruleId } = c.req.valid("param");
    const patch = c.req.valid("json");
    const row = await withAudit(
      c,
      (tx) =>
        updateRule(
          tx,
          callerOf(c).orgId,
          id,
          ruleId,
          (current) => ({
            path: patch.path === undefined ? current.path : patch.path,
            enabled: patch.enabled ?? current.enabled,
            config: patched(current.kind, current.config, patch),
          }),
          c.get("clock")(),
        ),
      (row) => ({ action: "route_rules.changed", target: { kind: "route_rule", id: row.id }, details: { change: "updated", fields: Object.keys(patch) } }),
    );
    return c.json(view(row), 200);
  })
  .openapi(remove, async (c) => {
    const { id, ruleId } = c.req.valid("param");
    await withAudit(
      c,
      (tx) => deleteRule(tx, callerOf(c).orgId, id, ruleId),
      () => ({ action: "route_rules.changed", target: { kind: "route_rule", id: ruleId }, details: { change: "removed", projectId: id } }),
    );
    return c.body(null, 204);
  });
