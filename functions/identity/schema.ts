/** Wire shapes shared by several identity routes; a shape one route file uses lives there. */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../shared/http/params";
import { ROLES, TAGS } from "../../shared/auth/permissions";

export const RoleSchema = z.enum(ROLES).openapi({
  description:
    "owner and admin: every tag; member: all but the *:admin tags; viewer: read tags plus settings and notifications; every role holds token:manage (its own tokens)",
});
export const TagSchema = z.enum(TAGS);
export const Name = z.string().trim().min(1).max(200);

export const UserSchema = z.object({ id: z.string(), email: z.string(), name: z.string() }).openapi("User");

export const OrganizationSchema = z.object({ id: z.string(), name: z.string(), role: RoleSchema }).openapi("Organization");

export const OrgIdParam = z.object({ orgId: pathId("orgId") });
