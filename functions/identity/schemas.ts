/** Wire shapes of the identity routes. */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../shared/http/params";
import { ROLES, TAGS } from "../../shared/auth/permissions";

export const RoleSchema = z.enum(ROLES).openapi({ description: "owner and admin: every tag; member: all but the *:admin tags; viewer: read tags plus settings and notifications; every role holds token:manage (its own tokens)" });
export const TagSchema = z.enum(TAGS);
export const Name = z.string().trim().min(1).max(200);
export const Email = z.email().max(320);

export const UserSchema = z.object({ id: z.string(), email: z.string(), name: z.string() }).openapi("User");

export const OrganizationSchema = z
  .object({ id: z.string(), name: z.string(), role: RoleSchema })
  .openapi("Organization");

export const MemberSchema = z
  .object({ userId: z.string(), email: z.string(), name: z.string(), role: RoleSchema, joinedAt: z.string() })
  .openapi("Member");

export const TokenSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    displayPrefix: z.string().openapi({ description: "The token's first characters, to recognize it" }),
    scopes: z.array(TagSchema).nullable().openapi({ description: "null: every tag the role grants" }),
    expiresAt: z.string().nullable().openapi({ description: "null: never expires. Never later than the expiry of the token that minted it" }),
    createdAt: z.string(),
  })
  .openapi("Token");

export const CreatedTokenSchema = TokenSchema.extend({
  token: z.string().openapi({ description: "The secret; shown only in this response" }),
}).openapi("CreatedToken");

export const OrgIdParam = z.object({ orgId: pathId("orgId") });
