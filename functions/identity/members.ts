/**
 * Members of an organization. Listing needs membership; changing roles and
 * removing members needs `org:admin`. Only an owner may grant the owner role or
 * change or remove an owner, and the last owner can be neither demoted nor
 * removed (409). Changes to one organization's members are serialized, so two
 * concurrent demotions cannot both pass the last-owner check.
 */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../shared/http/params";
import { and, asc, count, eq, gt, inArray, ne } from "drizzle-orm";
import { ROLE_TAGS, type Role } from "../../shared/auth/permissions";
import { memberships, organizations, users } from "../../shared/db/schema";
import type { Tx } from "../../shared/db/types";
import { ApiError, notFound } from "../../shared/http/errors";
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { MemberSchema, OrgIdParam, RoleSchema } from "./schemas";

const MemberParams = OrgIdParam.extend({ userId: pathId("userId") });

const list = defineRoute({
  method: "get",
  path: "/orgs/{orgId}/members",
  tags: ["Identity"],
  summary: "List the organization's members (any member may)",
  permission: "authenticated",
  request: { params: OrgIdParam, query: PageQuery },
  responses: { 200: jsonResponse(pageOf(MemberSchema, "MemberPage"), "Members, ordered by user id") },
});

const update = defineRoute({
  method: "patch",
  path: "/orgs/{orgId}/members/{userId}",
  tags: ["Identity"],
  summary: "Change a member's role",
  permission: "org:admin",
  request: { params: MemberParams, body: jsonRequest(z.strictObject({ role: RoleSchema })) },
  responses: { 200: jsonResponse(MemberSchema, "The member"), 409: { description: "Would leave the organization without an owner" } },
});

const remove = defineRoute({
  method: "delete",
  path: "/orgs/{orgId}/members/{userId}",
  tags: ["Identity"],
  summary: "Remove a member",
  permission: "org:admin",
  request: { params: MemberParams },
  responses: { 204: { description: "Removed" }, 409: { description: "Would leave the organization without an owner" } },
});

const memberColumns = {
  userId: memberships.userId,
  email: users.email,
  name: users.name,
  role: memberships.role,
  joinedAt: memberships.createdAt,
};

const view = (m: { userId: string; email: string; name: string; role: Role; joinedAt: Date }) => ({
  ...m,
  joinedAt: m.joinedAt.toISOString(),
});

/**
 * Serializes membership changes of one organization (its row is locked first, so
 * two owners demoting each other cannot deadlock), then checks the rules against
 * the caller's current role, not the one read when the token was checked.
 */
async function checkChange(tx: Tx, orgId: string, callerId: string, userId: string, newRole: Role | null) {
  await tx.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, orgId)).for("update");
  const rows = await tx
    .select({ userId: memberships.userId, role: memberships.role })
    .from(memberships)
    .where(and(eq(memberships.orgId, orgId), inArray(memberships.userId, [callerId, userId])));
  const callerRole = rows.find((r) => r.userId === callerId)?.role;
  if (!callerRole || !ROLE_TAGS[callerRole].includes("org:admin")) throw new ApiError("forbidden", "Missing permission 'org:admin'");
  const target = rows.find((r) => r.userId === userId);
  if (!target) throw notFound("Member");
  const touchesOwner = target.role === "owner" || newRole === "owner";
  if (touchesOwner && callerRole !== "owner") throw new ApiError("forbidden", "Only an owner can grant, change or remove the owner role");
  if (target.role === "owner" && newRole !== "owner") {
    const [owners] = await tx
      .select({ n: count() })
      .from(memberships)
      .where(and(eq(memberships.orgId, orgId), eq(memberships.role, "owner")));
    if (owners!.n <= 1) throw new ApiError("conflict", "The last owner cannot be demoted or removed");
  }
}

export const membersRouter = createRouter()
  .openapi(list, async (c) => {
    const { orgId } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const rows = await c.get("db")
      .select(memberColumns)
      .from(memberships)
      .innerJoin(users, eq(users.id, memberships.userId))
      .where(and(eq(memberships.orgId, orgId), cursor ? gt(memberships.userId, cursor) : undefined))
      .orderBy(asc(memberships.userId))
      .limit(limit + 1);
    const page = toPage(rows, limit, (m) => m.userId);
    return c.json({ items: page.items.map(view), nextCursor: page.nextCursor }, 200);
  })
  .openapi(update, async (c) => {
    const { orgId, userId } = c.req.valid("param");
    const { role } = c.req.valid("json");
    const caller = callerOf(c);
    const member = await c.get("db").transaction(async (tx) => {
      await checkChange(tx, orgId, caller.userId, userId, role);
      await tx.update(memberships).set({ role }).where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)));
      const [row] = await tx
        .select(memberColumns)
        .from(memberships)
        .innerJoin(users, eq(users.id, memberships.userId))
        .where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)));
      return row!;
    });
    c.get("authCache")?.invalidate(userId);
    return c.json(view(member), 200);
  })
  .openapi(remove, async (c) => {
    const { orgId, userId } = c.req.valid("param");
    const caller = callerOf(c);
    await c.get("db").transaction(async (tx) => {
      await checkChange(tx, orgId, caller.userId, userId, null);
      await tx.delete(memberships).where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)));
      // The removed user's default moves to another organization they belong to, if any.
      const [other] = await tx
        .select({ orgId: memberships.orgId })
        .from(memberships)
        .where(and(eq(memberships.userId, userId), ne(memberships.orgId, orgId)))
        .limit(1);
      await tx
        .update(users)
        .set({ defaultOrgId: other?.orgId ?? null })
        .where(and(eq(users.id, userId), eq(users.defaultOrgId, orgId)));
    });
    c.get("authCache")?.invalidate(userId);
    return c.body(null, 204);
  });
