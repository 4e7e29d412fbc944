/**
 * Members of an organization. Listing needs membership; changing roles and
 * removing members needs `org:admin`. Only an owner may grant the owner role or
 * change or remove an owner, and the last owner can be neither demoted nor
 * removed (409). Changes to one organization's members are serialized, so two
 * concurrent demotions cannot both pass the last-owner check (members-store.ts).
 */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../shared/http/params";
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { listMembers, removeMember, setMemberRole, type MemberRow } from "./members-store";
import { withAudit } from "../operations/audit/record";
import { OrgIdParam, RoleSchema } from "./schema";

export const MemberSchema = z.object({ userId: z.string(), email: z.string(), name: z.string(), role: RoleSchema, joinedAt: z.string() }).openapi("Member");

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

const view = (m: MemberRow) => ({ ...m, joinedAt: m.joinedAt.toISOString() });

export const membersRouter = createRouter()
  .openapi(list, async (c) => {
    const { orgId } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const page = toPage(await listMembers(c.get("db"), orgId, limit, cursor), limit, (m) => m.userId);
    return c.json({ items: page.items.map(view), nextCursor: page.nextCursor }, 200);
  })
  .openapi(update, async (c) => {
    const { orgId, userId } = c.req.valid("param");
    const { role } = c.req.valid("json");
    const member = await withAudit(
      c,
      (tx) => setMemberRole(tx, orgId, callerOf(c).userId, userId, role),
      () => ({ orgId, action: "member.role_changed", target: { kind: "member", id: userId }, details: { role } }),
    );
    // After commit: the member's next request sees the new role.
    c.get("services").authCache?.invalidate(userId);
    return c.json(view(member), 200);
  })
  .openapi(remove, async (c) => {
    const { orgId, userId } = c.req.valid("param");
    await withAudit(
      c,
      (tx) => removeMember(tx, orgId, callerOf(c).userId, userId),
      () => ({ orgId, action: "member.removed", target: { kind: "member", id: userId } }),
    );
    c.get("services").authCache?.invalidate(userId);
    return c.body(null, 204);
  });
