/**
 * Who is told: the event fan-out and the grid a joining member is seeded with.
 *
 * Recipient resolution is set-based, a fixed number of statements whatever the
 * member count: one INSERT … SELECT writes a feed entry for every member with
 * an enabled subscription to the category on an enabled, verified channel;
 * another writes one outbox row per such external channel. Both run in the
 * transaction that records the event, so an event is queued whole or not at all.
 * An event reaches the subscribers of its category and of the broader ones it
 * is part of (categories.ts `reachedCategories`): once per member, one send per
 * channel, however many of those categories they subscribed to.
 *
 * Text from terminals (a build's output quoted in a failure reason) carries
 * escape sequences: the event is stored without them, so no feed entry,
 * webhook, e-mail or chat message does.
 */
import { sql } from "drizzle-orm";
import { rowsOf } from "../../shared/db/rows";
import { notificationEvents } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { stripAnsi, stripAnsiDeep } from "../../shared/text/ansi";
import { CATEGORIES, categoryOf, reachedCategories } from "./categories";
import { idStem, RANDOM_ID_TAIL } from "./store";

export interface NotificationEventInput {
  orgId: string;
  category: string;
  title: string;
  message?: string | null;
  projectId?: string | null;
  data?: Record<string, unknown> | null;
  /** The user who reported it, if any. */
  createdBy?: string | null;
}

export interface EmitResult {
  eventId: string;
  recipients: number;
  sends: number;
}

/** The subscriptions that deliver an event of `category`: enabled, to a category it reaches, on the subscriber's own enabled and verified channel. */
const deliveringSubscriptions = (orgId: string, category: string) => sql`
  from notification_subscriptions s
  join notification_channels c on c.id = s.channel_id and c.org_id = s.org_id and c.user_id = s.user_id
  where s.org_id = ${orgId} and s.category in (${sql.join(
    reachedCategories(category).map((id) => sql`${id}`),
    sql`, `,
  )}) and s.enabled and c.enabled and c.verified`;

/**
 * Records an event and queues its notifications. Callable in-process by any
 * module (`POST /api/notifications/events` is a thin wrapper); afterwards wake
 * the delivery engine (`c.get("services").wakeDeliveries()` in a route).
 */
export async function emitNotificationEvent(db: Db, input: NotificationEventInput, now: Date = new Date()): Promise<EmitResult> {
  const eventId = newId("nevt", now.getTime());
  const at = sql`${now.toISOString()}::timestamptz`;
  return db.transaction(async (tx) => {
    await tx.insert(notificationEvents).values({
      id: eventId,
      orgId: input.orgId,
      category: input.category,
      // A title of escapes alone would be blank: the category's label says what happened.
      title: stripAnsi(input.title).trim() || (categoryOf(input.category)?.label ?? input.category),
      message: input.message == null ? null : stripAnsi(input.message),
      projectId: input.projectId ?? null,
      data: input.data == null ? null : stripAnsiDeep(input.data),
      createdBy: input.createdBy ?? null,
      createdAt: now,
    });
    // Current members only: a removed member keeps their rows but is not told.
    const feed = await tx.execute(sql`
      with recipients as (
        select distinct s.user_id ${deliveringSubscriptions(input.orgId, input.category)}
        and exists (select 1 from memberships m where m.org_id = s.org_id and m.user_id = s.user_id)
      ), inserted as (
        insert into notification_deliveries (id, org_id, user_id, event_id, created_at)
        select ${idStem("ndlv", now)} || ${RANDOM_ID_TAIL}, ${input.orgId}, r.user_id, ${eventId}, ${at} from recipients r
        returning 1
      ) select count(*)::int as n from inserted`);
    // One send per channel, even when it carries subscriptions to several of the categories reached.
    const sends = await tx.execute(sql`
      with channels as (
        select distinct c.id, c.org_id, c.user_id, c.kind ${deliveringSubscriptions(input.orgId, input.category)}
        and c.kind <> 'in_app'
      ), inserted as (
        insert into notification_outbox (id, org_id, user_id, event_id, delivery_id, channel_id, kind, status, attempts, due_at, created_at)
        select ${idStem("msg", now)} || ${RANDOM_ID_TAIL}, ch.org_id, ch.user_id, ${eventId}, d.id, ch.id, ch.kind, 'pending', 0, ${at}, ${at}
        from channels ch
        join notification_deliveries d on d.event_id = ${eventId} and d.user_id = ch.user_id
        returning 1
      ) select count(*)::int as n from inserted`);
    return { eventId, recipients: rowsOf<{ n: number }>(feed)[0]!.n, sends: rowsOf<{ n: number }>(sends)[0]!.n };
  });
}

/**
 * A member joining an organization gets an in_app channel (unless they kept
 * one from an earlier membership) and a subscription per category on it,
 * enabled per the organization's default, else the category's own. One
 * statement, so it is safe outside a transaction too.
 */
export async function seedMemberNotifications(db: Executor, orgId: string, userId: string, now: Date = new Date()): Promise<void> {
  const categories = sql.join(
    CATEGORIES.map((c) => sql`(${c.id}::text, ${c.defaultEnabled}::boolean)`),
    sql`, `,
  );
  await db.execute(sql`
    with existing as (
      select id from notification_channels where org_id = ${orgId} and user_id = ${userId} and kind = 'in_app' order by id limit 1
    ), created as (
      insert into notification_channels (id, org_id, user_id, kind, label, config, enabled, verified)
      select ${newId("nch", now.getTime())}, ${orgId}, ${userId}, 'in_app', 'In-app', '{}'::jsonb, true, true
      where not exists (select 1 from existing)
      returning id
    ), channel as (
      select id from created union all select id from existing
    )
    insert into notification_subscriptions (id, org_id, user_id, category, channel_id, enabled)
    select ${idStem("nsub", now)} || ${RANDOM_ID_TAIL}, ${orgId}, ${userId}, c.category, channel.id, coalesce(d.default_enabled, c.default_enabled)
    from channel
    cross join (values ${categories}) as c(category, default_enabled)
    left join notification_org_defaults d on d.org_id = ${orgId} and d.category = c.category
    on conflict (user_id, org_id, category, channel_id) do nothing`);
}
