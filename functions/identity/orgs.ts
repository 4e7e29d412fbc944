/** POST /api/orgs: create an organization; the caller becomes its owner. */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { Name, OrganizationSchema } from "./schema";
import { registerOrganization } from "./store";

const route = defineRoute({
  method: "post",
  path: "/orgs",
  tags: ["Identity"],
  summary: "Create an organization (the caller becomes owner)",
  permission: "authenticated",
  request: { body: jsonRequest(z.strictObject({ name: Name })) },
  responses: { 201: jsonResponse(OrganizationSchema, "The new organization") },
});

export const orgsRouter = createRouter().openapi(route, async (c) => {
  const { name } = c.req.valid("json");
  const caller = callerOf(c);
  const org = await registerOrganization(c.get("db"), name, caller.userId);
  return c.json({ id: org.id, name: org.name, role: "owner" as const }, 201);
});
