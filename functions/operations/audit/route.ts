/**
 * GET /api/orgs/{orgId}/audit: the organization's audit log, newest first, for
 * its owners and admins (`org:admin`, like the other member-management routes).
 * Pages by id (ids sort by time), so a page never shifts when rows are added.
 */
import { z } from "@hono/zod-openapi";
import { and, desc, eq, lt, or, type SQL } from "drizzle-orm";
import { auditLog } from "../../../shared/db/schema";
import { PageQuery, pageOf, toPage } from "../../../shared/http/pagination";
import { defineRoute, jsonResponse } from "../../../shared/http/route";
import { createRouter } from "../../../shared/http/router";
import { OrgIdParam } from "../../identity/schema";
import { AUDIT_ACTIONS } from "./record";

export const AuditEntrySchema = z
  .object({
    id: z.string(),
    at: z.string().openapi({ description: "When it happened (ISO 8601)" }),
    actor: z.object({
      kind: z
        .enum(["user", "token", "system"])
        .openapi({ description: "`user`: the console's session; `token`: a bearer token; `system`: the service itself" }),
      userId: z.string().nullable().openapi({ description: "The user (a token's owner); null for the system" }),
      tokenId: z.string().nullable().openapi({ description: "The token's id when a token acted (never its secret)" }),
    }),
    action: z.enum(AUDIT_ACTIONS),
    target: z.object({ kind: z.string(), id: z.string().nullable() }),
    clientAddress: z
      .string()
      .nullable()
      .openapi({ description: "The client the request came from (behind TRUSTED_PROXIES, the one X-Forwarded-For names); null when unknown" }),
    details: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({ description: "Small, secret-free details: changed field or variable names, a role, a domain" }),
  })
  .openapi("AuditEntry");

const filter = (description: string) => z.string().min(1).max(200).optional().openapi({ description });

const list = defineRoute({
  method: "get",
  path: "/orgs/{orgId}/audit",
  tags: ["Operations"],
  summary: "Read the organization's audit log",
  description:
    "Requires `org:admin` (owners and admins). Who (a user, a token, or the system) did what to which object, when, and from which client address: tokens created and revoked, members invited, removed and re-roled, settings and clone tokens changed, environment variables changed (names only, never values), projects created, deleted and transferred, deployments created, promoted and canceled, domains, route rules and notification channels changed. Newest first, `limit`/`cursor` pages; filters combine. Rows are kept AUDIT_RETENTION_DAYS (default 365).",
  permission: "org:admin",
  request: {
    params: OrgIdParam,
    query: PageQuery.extend({
      action: z.enum(AUDIT_ACTIONS).optional().openapi({ description: "Only this action" }),
      targetKind: filter("Only targets of this kind (`project`, `deployment`, `token`, `member`, …)"),
      targetId: filter("Only this target's id"),
      actor: filter("Only rows whose actor is this user id or this token id"),
    }),
  },
  responses: { 200: jsonResponse(pageOf(AuditEntrySchema, "AuditPage"), "Audit entries, newest first") },
});

type Row = typeof auditLog.$inferSelect;

const view = (r: Row) => ({
  id: r.id,
  at: r.createdAt.toISOString(),
  actor: { kind: r.actorKind as "user" | "token" | "system", userId: r.actorUserId, tokenId: r.actorTokenId },
  action: r.action as (typeof AUDIT_ACTIONS)[number],
  target: { kind: r.targetKind, id: r.targetId },
  clientAddress: r.clientAddress,
  details: r.details ?? null,
});

export const auditRouter = createRouter().openapi(list, async (c) => {
  const { orgId } = c.req.valid("param");
  const { limit, cursor, action, targetKind, targetId, actor } = c.req.valid("query");
  const where: (SQL | undefined)[] = [eq(auditLog.orgId, orgId)];
  if (cursor) where.push(lt(auditLog.id, cursor));
  if (action) where.push(eq(auditLog.action, action));
  if (targetKind) where.push(eq(auditLog.targetKind, targetKind));
  if (targetId) where.push(eq(auditLog.targetId, targetId));
  if (actor) where.push(or(eq(auditLog.actorUserId, actor), eq(auditLog.actorTokenId, actor)));
  const rows = await c
    .get("db")
    .select()
    .from(auditLog)
    .where(and(...where))
    .orderBy(desc(auditLog.id))
    .limit(limit + 1);
  const page = toPage(rows, limit, (r) => r.id);
  return c.json({ items: page.items.map(view), nextCursor: page.nextCursor }, 200);
});
