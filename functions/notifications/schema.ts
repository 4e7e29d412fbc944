/** Wire shapes of the Notifications routes. */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../shared/http/params";
import { CHANNEL_KINDS, SEND_STATUSES, type ChannelKind } from "../../shared/db/schema";
import { PageQuery } from "../../shared/http/pagination";
import { CategoryField } from "./categories";
import { CHANNEL_CONFIG_NAMES, CHANNEL_CONFIGS } from "./channel-config";

export const IdParam = z.object({ id: pathId("id") });

export const ChannelKindField = z.enum(CHANNEL_KINDS);
export const Label = z.string().trim().min(1).max(100);

export const ChannelSchema = z
  .object({
    id: z.string(),
    kind: ChannelKindField,
    label: z.string(),
    config: z
      .object({
        address: z.string().optional(),
        url: z.string().optional().openapi({ description: "webhook: the destination URL" }),
        signingSecretConfigured: z.boolean().optional().openapi({ description: "webhook: a signing secret is stored (never returned)" }),
        webhookUrlConfigured: z.boolean().optional().openapi({ description: "slack, discord, msteams: the URL is stored encrypted and never returned" }),
        webhookUrlHint: z.string().optional().openapi({ description: "slack, discord: the URL without its secret last segment" }),
        format: z.enum(["workflow", "connector"]).optional().openapi({ description: "msteams: Adaptive Card (workflow) or MessageCard (connector)" }),
      })
      .openapi({ description: "The displayable part of the config; secrets are never returned" }),
    enabled: z.boolean(),
    verified: z.boolean().openapi({ description: "Only enabled, verified channels are delivered to" }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("NotificationChannel");

export const CreatedChannelSchema = ChannelSchema.extend({
  signingSecret: z.string().optional().openapi({ description: "webhook only, when generated: the `whsec_` signing secret, shown only in this response" }),
}).openapi("CreatedNotificationChannel");

const CONFIG_DOC = "`url` and `webhookUrl` are interchangeable, as are `signingSecret` and `secret`.";
const create = <K extends ChannelKind>(kind: K, optionalConfig = false) =>
  z
    .strictObject({
      kind: z.literal(kind),
      label: Label,
      config: optionalConfig ? CHANNEL_CONFIGS[kind].optional() : CHANNEL_CONFIGS[kind],
    })
    .openapi(`Create${CHANNEL_CONFIG_NAMES[kind].replace("Config", "")}`);

/** One shape per kind, told apart by `kind` (a `oneOf` with a discriminator in the document). */
export const CreateChannelBody = z
  .discriminatedUnion("kind", [
    // In CHANNEL_KINDS order, which is the order errors list them in.
    create("email"),
    create("webhook"),
    create("in_app", true),
    create("slack"),
    create("discord"),
    create("msteams"),
  ])
  .openapi("CreateNotificationChannel", { description: `The channel's \`config\` follows its \`kind\`. ${CONFIG_DOC}` });

/** The kind is fixed at creation, so a PATCH config is checked against the channel's kind by the handler. */
const PatchConfig = z.record(z.string(), z.unknown()).openapi({
  description: `The whole config, in the shape of the channel's kind. ${CONFIG_DOC}`,
  anyOf: Object.values(CHANNEL_CONFIG_NAMES).map((name) => ({ $ref: `#/components/schemas/${name}` })),
});

export const PatchChannelBody = z.strictObject({
  label: Label.optional(),
  enabled: z.boolean().optional(),
  verified: z.boolean().optional(),
  config: PatchConfig.optional(),
});

export const TestSendSchema = z
  .object({
    delivered: z.boolean(),
    statusCode: z.number().int().nullable().openapi({ description: "The destination's HTTP status (SMTP code for e-mail), when it answered" }),
    reason: z.string().nullable().openapi({ description: "Why it failed, in our words; the remote response body is never echoed" }),
    durationMs: z.number().int(),
    channel: ChannelSchema,
  })
  .openapi("NotificationTestSend");

export const SubscriptionSchema = z
  .object({ id: z.string(), category: z.string(), channelId: z.string(), enabled: z.boolean(), createdAt: z.string(), updatedAt: z.string() })
  .openapi("NotificationSubscription");

export const PutSubscriptionBody = z.strictObject({
  category: CategoryField,
  channelId: z.string().min(1).max(64).openapi({ description: "One of the caller's channels in the active organization" }),
  enabled: z.boolean(),
});

export const OrgDefaultSchema = z
  .object({
    category: z.string(),
    defaultEnabled: z.boolean(),
    overridden: z.boolean().openapi({ description: "true: set by the organization; false: the category's own defaultEnabled" }),
  })
  .openapi("NotificationOrgDefault");

export const PutDefaultBody = z.strictObject({ category: CategoryField, defaultEnabled: z.boolean() });

const SendSchema = z
  .object({
    id: z.string().openapi({ description: "The send id; also the `webhook-id` of webhook deliveries" }),
    channelId: z.string().nullable().openapi({ description: "null once the channel was deleted" }),
    kind: ChannelKindField,
    status: z.enum(SEND_STATUSES),
    attempts: z.number().int(),
    lastError: z.string().nullable(),
    lastStatusCode: z.number().int().nullable(),
    nextAttemptAt: z.string().nullable(),
    completedAt: z.string().nullable(),
  })
  .openapi("NotificationSend");

export const DeliverySchema = z
  .object({
    id: z.string(),
    eventId: z.string(),
    category: z.string(),
    title: z.string(),
    message: z.string().nullable(),
    projectId: z.string().nullable(),
    data: z.record(z.string(), z.unknown()).nullable(),
    seen: z.boolean(),
    seenAt: z.string().nullable(),
    createdAt: z.string(),
    sends: z.array(SendSchema).openapi({ description: "The external channel sends of this notification" }),
  })
  .openapi("NotificationDelivery");

const AttemptSchema = z
  .object({
    attempt: z.number().int(),
    startedAt: z.string(),
    durationMs: z.number().int(),
    outcome: z.enum(["delivered", "retry", "failed"]),
    statusCode: z.number().int().nullable(),
    error: z.string().nullable(),
    nextAttemptAt: z.string().nullable(),
  })
  .openapi("NotificationAttempt");

export const DeliveryDetailSchema = DeliverySchema.extend({
  sends: z.array(SendSchema.extend({ attemptLog: z.array(AttemptSchema) })),
}).openapi("NotificationDeliveryDetail");

export const DeliveriesQuery = PageQuery.extend({
  unseen: z.enum(["true", "false"]).optional().openapi({ description: "`true`: only unseen entries; `false`: only seen ones" }),
});

const JsonObject = z.record(z.string(), z.unknown());

export const EventBody = z.strictObject({
  category: CategoryField,
  projectId: z.string().trim().min(1).max(64).optional().openapi({ description: "The project the event is about (stored as given)" }),
  title: z.string().trim().min(1).max(200),
  message: z.string().max(4000).optional(),
  data: JsonObject.optional().openapi({ description: "Free-form details (at most 16 KB as JSON), passed to webhooks as `data.data`" }),
});

export const EventResultSchema = z
  .object({
    eventId: z.string(),
    recipients: z.number().int().openapi({ description: "Members who got an in-app feed entry" }),
    sends: z.number().int().openapi({ description: "External channel sends queued in the outbox" }),
  })
  .openapi("NotificationEventResult");
