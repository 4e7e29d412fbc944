/**
 * The caller's notification channels in the active organization, and the test
 * send. Another member's channel answers 404 on every per-id route, exactly as
 * an id that never existed.
 */
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter, ownerOf } from "../../shared/http/router";
import { newId } from "../../shared/ids";
import { messageOf } from "./delivery/engine";
import { sendToChannel } from "./delivery/send";
import { recordTestEntry } from "./feed-store";
import { ChannelSchema, CreateChannelBody, CreatedChannelSchema, IdParam, PatchChannelBody, TestSendSchema } from "./schema";
import { channelView, createChannel, deleteChannel, getChannel, listChannels, markVerified, updateChannel } from "./store";
import { DELIVERY_LIMIT_TEXT } from "./limits";
import { withAudit } from "../operations/audit/record";
import { takeTestSend, TEST_SEND_LIMIT_TEXT, TOO_MANY_TEST_SENDS, tooManyTestSends } from "./test-send-limit";

const TAGS = ["Notifications"];

const list = defineRoute({
  method: "get",
  path: "/notifications/channels",
  tags: TAGS,
  summary: "List the caller's channels",
  permission: "notifications:read",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(pageOf(ChannelSchema, "NotificationChannelPage"), "Channels, oldest first") },
});

const create = defineRoute({
  method: "post",
  path: "/notifications/channels",
  tags: TAGS,
  summary: "Create a channel",
  description:
    "New channels start `enabled: true`. `in_app` channels start verified; every other kind starts `verified: false` and receives nothing until verified (PATCH `verified: true`, or a successful test send). A webhook channel without `config.signingSecret` gets a generated `whsec_` secret, returned once as `signingSecret`. Secrets (signing secrets, chat webhook URLs) are stored encrypted and never returned.",
  permission: "notifications:write",
  idempotent: true,
  request: { body: jsonRequest(CreateChannelBody) },
  responses: { 201: jsonResponse(CreatedChannelSchema, "The channel") },
});

const patch = defineRoute({
  method: "patch",
  path: "/notifications/channels/{id}",
  tags: TAGS,
  summary: "Update a channel (send only the fields to change)",
  description:
    "A `config` that differs from the stored one resets `verified` to false on every kind but `in_app` (the destination may have moved); an explicit `verified` in the same body wins. The config is replaced as a whole (kind-specific shape as on create), except that a webhook config without `signingSecret` keeps the current secret. `verified: false` is refused for `in_app`. `verified: true` is taken at the caller's word; deliveries are rate-limited (" +
    DELIVERY_LIMIT_TEXT +
    "); a send over a limit waits in the outbox until the window ends.",
  permission: "notifications:write",
  request: { params: IdParam, body: jsonRequest(PatchChannelBody) },
  responses: { 200: jsonResponse(ChannelSchema, "The channel") },
});

const remove = defineRoute({
  method: "delete",
  path: "/notifications/channels/{id}",
  tags: TAGS,
  summary: "Delete a channel",
  description: "Its subscriptions go with it; sends still queued for it are cancelled.",
  permission: "notifications:write",
  request: { params: IdParam },
  responses: { 204: { description: "Deleted" } },
});

const test = defineRoute({
  method: "post",
  path: "/notifications/channels/{id}/test",
  tags: TAGS,
  summary: "Send a test message to the channel now",
  description: `One attempt, no retries, whether or not the channel is enabled or verified. Answers 200 with \`delivered\` and, on failure, our own \`reason\` (the destination's status code at most; its response body is never echoed). A successful test send marks the channel verified. For \`in_app\` the test message is added to the caller's feed.\n\nRate limit (every kind but \`in_app\`): ${TEST_SEND_LIMIT_TEXT}, fixed windows starting at the first test send, counted in the database so they hold across processes; failed sends count too. Past it: 429 problem+json with \`Retry-After\` (seconds), nothing sent.`,
  permission: "notifications:write",
  request: { params: IdParam },
  responses: { 200: jsonResponse(TestSendSchema, "The outcome"), 429: TOO_MANY_TEST_SENDS },
});

export const channelsRouter = createRouter()
  .openapi(list, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const page = toPage(await listChannels(c.get("db"), ownerOf(c), limit, cursor), limit, (r) => r.id);
    return c.json({ items: page.items.map(channelView), nextCursor: page.nextCursor }, 200);
  })
  .openapi(create, async (c) => {
    const body = c.req.valid("json");
    const { row, generatedSecret } = await withAudit(
      c,
      (tx) => createChannel(tx, c.get("keyring"), ownerOf(c), body, c.get("clock")()),
      // The kind only: a channel's destination (a chat hook URL) is itself a credential.
      ({ row }) => ({ action: "channel.created", target: { kind: "channel", id: row.id }, details: { kind: row.kind } }),
    );
    return c.json({ ...channelView(row), ...(generatedSecret ? { signingSecret: generatedSecret } : {}) }, 201);
  })
  .openapi(patch, async (c) => {
    const row = await withAudit(
      c,
      (tx) => updateChannel(tx, c.get("keyring"), ownerOf(c), c.req.valid("param").id, c.req.valid("json"), c.get("clock")()),
      (row) => ({ action: "channel.updated", target: { kind: "channel", id: row.id }, details: { fields: Object.keys(c.req.valid("json")) } }),
    );
    return c.json(channelView(row), 200);
  })
  .openapi(remove, async (c) => {
    await withAudit(
      c,
      (tx) => deleteChannel(tx, ownerOf(c), c.req.valid("param").id),
      () => ({ action: "channel.deleted", target: { kind: "channel", id: c.req.valid("param").id } }),
    );
    return c.body(null, 204);
  })
  .openapi(test, async (c) => {
    const o = ownerOf(c);
    const { id } = c.req.valid("param");
    let channel = await getChannel(c.get("db"), o, id);
    const now = c.get("clock")();
    if (channel.kind !== "in_app") {
      const limited = await takeTestSend(c, o.orgId, channel.id, now);
      if (limited) throw tooManyTestSends(limited);
    }
    const event = {
      id: newId("nevt", now.getTime()),
      orgId: o.orgId,
      category: "test",
      projectId: null,
      title: "Test notification",
      message: `This is a test message for the channel "${channel.label}". If you can read it, the channel works.`,
      data: null,
      createdBy: o.userId,
      createdAt: now,
    };
    const started = Date.now();
    const result =
      channel.kind === "in_app"
        ? await recordTestEntry(c.get("db"), o, event).then(() => ({ ok: true as const, status: 200 }))
        : await sendToChannel(channel, messageOf(event), newId("msg", now.getTime()), now, c.get("keyring"), {
            outbound: c.get("services").outbound,
            mailer: c.get("services").mailer,
          });
    if (result.ok && !channel.verified) channel = (await markVerified(c.get("db"), o, channel, c.get("clock")())) ?? (await getChannel(c.get("db"), o, id));
    return c.json(
      {
        delivered: result.ok,
        statusCode: channel.kind === "in_app" ? null : (result.status ?? null),
        reason: result.ok ? null : result.error,
        durationMs: Date.now() - started,
        channel: channelView(channel),
      },
      200,
    );
  });
