/** The caller's in-app alert feed in the active organization. */
import { z } from "@hono/zod-openapi";
import { pageOf } from "../../shared/http/pagination";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { createRouter, ownerOf } from "../../shared/http/router";
import { getDelivery, listDeliveries, markSeen, unseenCount } from "./feed-store";
import { DeliveriesQuery, DeliveryDetailSchema, DeliverySchema, IdParam } from "./schema";

const TAGS = ["Notifications"];

const list = defineRoute({
  method: "get",
  path: "/notifications/deliveries",
  tags: TAGS,
  summary: "List the caller's deliveries (the in-app feed), newest first",
  description:
    "`unseen=true` lists only unseen entries (`false`: only seen ones); `limit` 1-100 (default 50); `cursor` is the previous page's `nextCursor`. Each entry carries the state of its external sends.",
  permission: "notifications:read",
  request: { query: DeliveriesQuery },
  responses: { 200: jsonResponse(pageOf(DeliverySchema, "NotificationDeliveryPage"), "Deliveries") },
});

const count = defineRoute({
  method: "get",
  path: "/notifications/deliveries/unseen-count",
  tags: TAGS,
  summary: "Count the caller's unseen deliveries",
  permission: "notifications:read",
  responses: { 200: jsonResponse(z.object({ count: z.number().int() }).openapi("NotificationUnseenCount"), "The count") },
});

const get = defineRoute({
  method: "get",
  path: "/notifications/deliveries/{id}",
  tags: TAGS,
  summary: "Read one delivery with the attempt log of each send",
  permission: "notifications:read",
  request: { params: IdParam },
  responses: { 200: jsonResponse(DeliveryDetailSchema, "The delivery") },
});

const seen = defineRoute({
  method: "post",
  path: "/notifications/deliveries/{id}/seen",
  tags: TAGS,
  summary: "Mark one delivery seen",
  description: "Idempotent: repeating it changes nothing and keeps the first `seenAt`.",
  permission: "notifications:write",
  request: { params: IdParam },
  responses: { 200: jsonResponse(DeliverySchema, "The delivery") },
});

export const deliveriesRouter = createRouter()
  .openapi(list, async (c) => {
    const { limit, cursor, unseen } = c.req.valid("query");
    return c.json(await listDeliveries(c.get("db"), ownerOf(c), { limit, cursor, unseen: unseen === undefined ? undefined : unseen === "true" }), 200);
  })
  // Registered before `{id}` so "unseen-count" is not taken for an id.
  .openapi(count, async (c) => c.json({ count: await unseenCount(c.get("db"), ownerOf(c)) }, 200))
  .openapi(get, async (c) => c.json(await getDelivery(c.get("db"), ownerOf(c), c.req.valid("param").id), 200))
  .openapi(seen, async (c) => c.json(await markSeen(c.get("db"), ownerOf(c), c.req.valid("param").id, c.get("clock")()), 200));
