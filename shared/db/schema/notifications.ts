/**
 * Notifications: channels, subscriptions, org defaults, events, the in-app feed
 * (deliveries) and the outbox the delivery engine drains.
 *
 * Channel secrets (webhook signing keys, chat webhook URLs) live only in
 * `secret_ciphertext`, AES-GCM bound to the channel row; `config` holds the
 * part that may be shown (an e-mail address, a webhook URL, a masked hint).
 */
import { sql } from "drizzle-orm";
import { boolean, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations, users } from "./identity";

export const CHANNEL_KINDS = ["email", "webhook", "in_app", "slack", "discord", "msteams"] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** pending: due at `due_at`; sending: leased until `due_at`; the rest are final. */
export const SEND_STATUSES = ["pending", "sending", "delivered", "failed", "cancelled"] as const;
export type SendStatus = (typeof SEND_STATUSES)[number];

export const notificationChannels = pgTable(
  "notification_channels",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: CHANNEL_KINDS }).notNull(),
    label: text("label").notNull(),
    /** The displayable part of the config (never a secret). */
    config: jsonb("config").$type<Record<string, unknown>>().notNull().default({}),
    /** JSON of the secret part (`webhookUrl`, `signingSecret`), encrypted; null for kinds without secrets. */
    secretCiphertext: text("secret_ciphertext"),
    enabled: boolean("enabled").notNull().default(true),
    verified: boolean("verified").notNull().default(false),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [index("notification_channels_owner_idx").on(t.orgId, t.userId, t.id)],
);

export const notificationSubscriptions = pgTable(
  "notification_subscriptions",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    category: text("category").notNull(),
    channelId: text("channel_id")
      .notNull()
      .references(() => notificationChannels.id, { onDelete: "cascade" }),
    enabled: boolean("enabled").notNull(),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [
    // The upsert key of PUT /subscriptions.
    uniqueIndex("notification_subscriptions_cell_idx").on(t.userId, t.orgId, t.category, t.channelId),
    // Fan-out: every enabled subscription of one category in one organization.
    index("notification_subscriptions_fanout_idx").on(t.orgId, t.category).where(sql`${t.enabled}`),
    index("notification_subscriptions_channel_idx").on(t.channelId),
  ],
);

export const notificationOrgDefaults = pgTable(
  "notification_org_defaults",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    category: text("category").notNull(),
    defaultEnabled: boolean("default_enabled").notNull(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.category] })],
);

/** One reported event; its payload is stored once, however many recipients it has. */
export const notificationEvents = pgTable(
  "notification_events",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    category: text("category").notNull(),
    projectId: text("project_id"),
    title: text("title").notNull(),
    message: text("message"),
    data: jsonb("data").$type<Record<string, unknown>>(),
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: createdAt(),
  },
  (t) => [index("notification_events_org_idx").on(t.orgId, t.id)],
);

/** The in-app alert feed: one entry per recipient of an event. */
export const notificationDeliveries = pgTable(
  "notification_deliveries",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    eventId: text("event_id")
      .notNull()
      .references(() => notificationEvents.id, { onDelete: "cascade" }),
    seenAt: ts("seen_at"),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("notification_deliveries_event_user_idx").on(t.eventId, t.userId),
    index("notification_deliveries_feed_idx").on(t.orgId, t.userId, t.id),
    index("notification_deliveries_unseen_idx").on(t.orgId, t.userId).where(sql`${t.seenAt} is null`),
  ],
);

/**
 * The outbox: one row per (recipient, external channel) send. Its id is the
 * Standard Webhooks `webhook-id`, stable across retries. Claimed with
 * `FOR UPDATE SKIP LOCKED` and a lease (status `sending`, `due_at` = lease end)
 * so several engines (processes, cron runs) never send the same row at once.
 */
export const notificationOutbox = pgTable(
  "notification_outbox",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    eventId: text("event_id")
      .notNull()
      .references(() => notificationEvents.id, { onDelete: "cascade" }),
    deliveryId: text("delivery_id")
      .notNull()
      .references(() => notificationDeliveries.id, { onDelete: "cascade" }),
    /** Null once the channel is deleted: the send is then cancelled. */
    channelId: text("channel_id").references(() => notificationChannels.id, { onDelete: "set null" }),
    kind: text("kind", { enum: CHANNEL_KINDS }).notNull(),
    status: text("status", { enum: SEND_STATUSES }).notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    dueAt: ts("due_at").notNull(),
    leaseToken: text("lease_token"),
    lastError: text("last_error"),
    lastStatusCode: integer("last_status_code"),
    createdAt: createdAt(),
    completedAt: ts("completed_at"),
  },
  (t) => [
    index("notification_outbox_due_idx").on(t.dueAt).where(sql`${t.status} in ('pending', 'sending')`),
    index("notification_outbox_delivery_idx").on(t.deliveryId),
    index("notification_outbox_event_idx").on(t.eventId),
  ],
);

/** Every attempt of a send and its outcome (never the remote response body). */
export const notificationAttempts = pgTable(
  "notification_attempts",
  {
    id: text("id").primaryKey(),
    outboxId: text("outbox_id")
      .notNull()
      .references(() => notificationOutbox.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    startedAt: ts("started_at").notNull(),
    durationMs: integer("duration_ms").notNull(),
    /** delivered | retry (will be retried) | failed (final) */
    outcome: text("outcome", { enum: ["delivered", "retry", "failed"] }).notNull(),
    statusCode: integer("status_code"),
    error: text("error"),
    nextAttemptAt: ts("next_attempt_at"),
  },
  (t) => [index("notification_attempts_outbox_idx").on(t.outboxId, t.attempt)],
);
