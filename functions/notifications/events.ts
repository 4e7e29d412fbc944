/** POST /api/notifications/events: report an event; it fans out to the organization's members. */
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { emitNotificationEvent } from "./fanout";
import { DELIVERY_LIMIT_TEXT } from "./limits";
import { EventBody, EventResultSchema } from "./schema";

const MAX_DATA_BYTES = 16 * 1024;

const route = defineRoute({
  method: "post",
  path: "/notifications/events",
  tags: ["Notifications"],
  summary: "Report an event to the active organization's members",
  description:
    "Every member with an enabled subscription to `category` on an enabled, verified channel is a recipient: each gets one entry in the in-app feed, and each of their external channels (email, webhook, slack, discord, msteams) gets a send queued in the outbox, delivered in the background with retries and rate limits (" +
    DELIVERY_LIMIT_TEXT +
    "; a send over a limit is delayed to the end of the window, not dropped). A narrow category reaches the subscribers of the broader one too: `build.failed` is also delivered to `deploy.failed` subscribers, once per member and once per channel however many of the two they subscribed to. Terminal escape sequences (ANSI colours, OSC titles and links) are removed from `title`, `message` and every string of `data` before the event is stored. Answers 202 with the counts. Other modules call the same function in-process (`emitNotificationEvent`).",
  permission: "notifications:admin",
  request: { body: jsonRequest(EventBody) },
  responses: { 202: jsonResponse(EventResultSchema, "Queued") },
});

export const eventsRouter = createRouter().openapi(route, async (c) => {
  const body = c.req.valid("json");
  if (body.data && new TextEncoder().encode(JSON.stringify(body.data)).length > MAX_DATA_BYTES) {
    throw badRequest("data", `data must be at most ${MAX_DATA_BYTES / 1024} KB as JSON`);
  }
  const caller = callerOf(c);
  const result = await emitNotificationEvent(c.get("db"), { ...body, orgId: caller.orgId, createdBy: caller.userId }, c.get("clock")());
  if (result.sends > 0) c.get("services").wakeDeliveries();
  return c.json(result, 202);
});
