/** The organization's notification defaults: one per category, seeding new members' grids. */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { OrgDefaultSchema, PutDefaultBody } from "./schema";
import { listDefaults, putDefault } from "./store";

const list = defineRoute({
  method: "get",
  path: "/notifications/defaults",
  tags: ["Notifications"],
  summary: "List the organization's defaults (one per category)",
  description: "Every category, with the organization's default where it set one and the category's `defaultEnabled` otherwise. Complete (not paginated).",
  permission: "notifications:read",
  responses: { 200: jsonResponse(z.object({ items: z.array(OrgDefaultSchema) }).openapi("NotificationOrgDefaultList"), "Defaults") },
});

const put = defineRoute({
  method: "put",
  path: "/notifications/defaults",
  tags: ["Notifications"],
  summary: "Set one organization default",
  description: "Upsert on (organization, category). Seeds the grids of members who join afterwards; existing members' subscriptions are not changed.",
  permission: "notifications:admin",
  request: { body: jsonRequest(PutDefaultBody) },
  responses: { 200: jsonResponse(OrgDefaultSchema, "The default") },
});

export const defaultsRouter = createRouter()
  .openapi(list, async (c) => c.json({ items: await listDefaults(c.get("db"), callerOf(c).orgId) }, 200))
  .openapi(put, async (c) => {
    const { category, defaultEnabled } = c.req.valid("json");
    return c.json(await putDefault(c.get("db"), callerOf(c).orgId, category, defaultEnabled, c.get("clock")()), 200);
  });
