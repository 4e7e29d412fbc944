/** GET /api/me: who the token belongs to, their organizations and effective tags. */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { OrganizationSchema, TagSchema, UserSchema } from "./schema";
import { findUser, organizationsOf } from "./store";

const route = defineRoute({
  method: "get",
  path: "/me",
  tags: ["Identity"],
  summary: "The caller: user, organizations with role, active organization, effective tags",
  permission: "authenticated",
  responses: {
    200: jsonResponse(
      z.object({
        user: UserSchema,
        organizations: z.array(OrganizationSchema),
        activeOrganizationId: z.string().nullable(),
        tags: z.array(TagSchema),
        tokenScopes: z.array(TagSchema).nullable(),
      }),
      "The caller",
    ),
  },
});

export const meRouter = createRouter().openapi(route, async (c) => {
  const caller = callerOf(c);
  const db = c.get("db");
  const user = await findUser(db, caller.userId);
  const orgs = await organizationsOf(db, caller.userId);
  return c.json(
    {
      user: user!,
      organizations: orgs,
      activeOrganizationId: caller.orgId,
      tags: [...caller.tags],
      tokenScopes: caller.scopes as z.infer<typeof TagSchema>[] | null,
    },
    200,
  );
});
