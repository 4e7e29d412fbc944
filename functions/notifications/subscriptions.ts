/** The caller's subscription grid: one toggle per (category, channel). */
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter, ownerOf } from "../../shared/http/router";
import { IdParam, PutSubscriptionBody, SubscriptionSchema } from "./schema";
import { deleteSubscription, listSubscriptions, putSubscription, subscriptionView } from "./store";

const TAGS = ["Notifications"];

const list = defineRoute({
  method: "get",
  path: "/notifications/subscriptions",
  tags: TAGS,
  summary: "List the caller's subscriptions",
  description:
    "A member's grid is seeded when they join: one subscription per category on their in_app channel, enabled per the organization's defaults. A channel created later starts with no subscriptions.",
  permission: "notifications:read",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(pageOf(SubscriptionSchema, "NotificationSubscriptionPage"), "Subscriptions, oldest first") },
});

const put = defineRoute({
  method: "put",
  path: "/notifications/subscriptions",
  tags: TAGS,
  summary: "Create or update a subscription",
  description:
    "Idempotent upsert on (user, organization, category, channel): `enabled` is set to the sent value. `channelId` must be one of the caller's channels in the active organization (otherwise 400 naming `channelId`); an unknown category is 400 naming the allowed ids.",
  permission: "notifications:write",
  request: { body: jsonRequest(PutSubscriptionBody) },
  responses: { 200: jsonResponse(SubscriptionSchema, "The subscription") },
});

const remove = defineRoute({
  method: "delete",
  path: "/notifications/subscriptions/{id}",
  tags: TAGS,
  summary: "Delete a subscription",
  permission: "notifications:write",
  request: { params: IdParam },
  responses: { 204: { description: "Deleted" } },
});

export const subscriptionsRouter = createRouter()
  .openapi(list, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const page = toPage(await listSubscriptions(c.get("db"), ownerOf(c), limit, cursor), limit, (r) => r.id);
    return c.json({ items: page.items.map(subscriptionView), nextCursor: page.nextCursor }, 200);
  })
  .openapi(put, async (c) => c.json(subscriptionView(await putSubscription(c.get("db"), ownerOf(c), c.req.valid("json"), c.get("clock")())), 200))
  .openapi(remove, async (c) => {
    await deleteSubscription(c.get("db"), ownerOf(c), c.req.valid("param").id);
    return c.body(null, 204);
  });
