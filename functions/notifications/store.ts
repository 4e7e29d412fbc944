/**
 * Data access of the per-user notification resources (channels, subscriptions)
 * and the per-organization defaults. Every query filters by the owner (org and
 * user), so another member's or organization's id is simply not found.
 */
import { and, asc, eq, gt, sql } from "drizzle-orm";
import type { Keyring } from "../../shared/crypto/keyring";
import { notificationChannels, notificationOrgDefaults, notificationSubscriptions, type ChannelKind } from "../../shared/db/schema";
import { rowsOf } from "../../shared/db/rows";
import type { Db, Executor } from "../../shared/db/types";
import { badRequest, notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { CATEGORIES } from "./categories";
import { configChanged, parseChannelConfig } from "./channel-config";
import { decryptSecrets, sealSecrets } from "./secrets";

export interface Owner {
  orgId: string;
  userId: string;
}

export type ChannelRow = typeof notificationChannels.$inferSelect;
type SubscriptionRow = typeof notificationSubscriptions.$inferSelect;

/** `<prefix>_` + the id's time part; SQL appends 16 random hex characters (see shared/ids.ts). */
export const idStem = (prefix: string, now: Date) => newId(prefix, now.getTime()).slice(0, prefix.length + 11);
export const RANDOM_ID_TAIL = sql.raw("substr(replace(gen_random_uuid()::text, '-', ''), 1, 16)");

export function channelView(row: ChannelRow) {
  return {
    id: row.id,
    kind: row.kind,
    label: row.label,
    config: row.config,
    enabled: row.enabled,
    verified: row.verified,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export function subscriptionView(row: SubscriptionRow) {
  return {
    id: row.id,
    category: row.category,
    channelId: row.channelId,
    enabled: row.enabled,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

const ownsChannel = (o: Owner, id: string) =>
  and(eq(notificationChannels.id, id), eq(notificationChannels.orgId, o.orgId), eq(notificationChannels.userId, o.userId));

// ------------------------------------------------------------------ channels

export async function listChannels(db: Db, o: Owner, limit: number, cursor?: string) {
  return db
    .select()
    .from(notificationChannels)
    .where(and(eq(notificationChannels.orgId, o.orgId), eq(notificationChannels.userId, o.userId), cursor ? gt(notificationChannels.id, cursor) : undefined))
    .orderBy(asc(notificationChannels.id))
    .limit(limit + 1);
}

export async function getChannel(db: Executor, o: Owner, id: string): Promise<ChannelRow> {
  const [row] = await db.select().from(notificationChannels).where(ownsChannel(o, id));
  if (!row) throw notFound("Channel");
  return row;
}

export async function createChannel(db: Db, keyring: Keyring, o: Owner, input: { kind: ChannelKind; label: string; config?: unknown }, now: Date) {
  const parsed = parseChannelConfig(input.kind, input.config);
  const id = newId("nch", now.getTime());
  const [row] = await db
    .insert(notificationChannels)
    .values({
      id,
      ...o,
      kind: input.kind,
      label: input.label,
      config: parsed.publicConfig,
      secretCiphertext: await sealSecrets(keyring, o.orgId, id, parsed.secrets),
      enabled: true,
      // in_app needs no proof of a destination; every other kind waits for verification.
      verified: input.kind === "in_app",
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return { row: row!, generatedSecret: parsed.generatedSecret };
}

export interface ChannelPatch {
  label?: string;
  enabled?: boolean;
  verified?: boolean;
  config?: unknown;
}

/**
 * Applies a PATCH under a row lock. A config that differs from the stored one
 * (displayable part or secrets) resets `verified` on every kind but in_app: the
 * destination may have moved. An explicit `verified` in the same body wins.
 */
export async function updateChannel(db: Db, keyring: Keyring, o: Owner, id: string, patch: ChannelPatch, now: Date): Promise<ChannelRow> {
  return db.transaction(async (tx) => {
    const [row] = await tx.select().from(notificationChannels).where(ownsChannel(o, id)).for("update");
    if (!row) throw notFound("Channel");
    const set: Partial<typeof notificationChannels.$inferInsert> = {};
    if (patch.label !== undefined) set.label = patch.label;
    if (patch.enabled !== undefined) set.enabled = patch.enabled;
    if (patch.config !== undefined) {
      const current = await decryptSecrets(keyring, row);
      const parsed = parseChannelConfig(row.kind, patch.config, current);
      if (configChanged({ publicConfig: row.config, secrets: current }, parsed)) {
        set.config = parsed.publicConfig;
        set.secretCiphertext = await sealSecrets(keyring, o.orgId, id, parsed.secrets);
        if (row.kind !== "in_app") set.verified = false;
      }
    }
    if (patch.verified !== undefined) {
      if (row.kind === "in_app" && !patch.verified) throw badRequest("verified", "in_app channels are always verified");
      set.verified = patch.verified;
    }
    if (Object.keys(set).length === 0) return row;
    const [updated] = await tx
      .update(notificationChannels)
      .set({ ...set, updatedAt: now })
      .where(eq(notificationChannels.id, id))
      .returning();
    return updated!;
  });
}

/**
 * Marks a channel verified after a successful test send, unless its destination
 * changed meanwhile (then the test proved nothing about the new one): null.
 */
export async function markVerified(db: Db, o: Owner, tested: ChannelRow, now: Date): Promise<ChannelRow | null> {
  const [row] = await db
    .update(notificationChannels)
    .set({ verified: true, updatedAt: now })
    .where(
      and(
        ownsChannel(o, tested.id),
        sql`${notificationChannels.config} = ${JSON.stringify(tested.config)}::jsonb`,
        sql`${notificationChannels.secretCiphertext} is not distinct from ${tested.secretCiphertext}`,
      ),
    )
    .returning();
  return row ?? null;
}

export async function deleteChannel(db: Db, o: Owner, id: string): Promise<void> {
  const deleted = await db.delete(notificationChannels).where(ownsChannel(o, id)).returning({ id: notificationChannels.id });
  if (deleted.length === 0) throw notFound("Channel");
}

// ------------------------------------------------------------- subscriptions

export async function listSubscriptions(db: Db, o: Owner, limit: number, cursor?: string) {
  return db
    .select()
    .from(notificationSubscriptions)
    .where(
      and(
        eq(notificationSubscriptions.orgId, o.orgId),
        eq(notificationSubscriptions.userId, o.userId),
        cursor ? gt(notificationSubscriptions.id, cursor) : undefined,
      ),
    )
    .orderBy(asc(notificationSubscriptions.id))
    .limit(limit + 1);
}

const FOREIGN_KEY_VIOLATION = "23503";

/**
 * One statement: the channel must be the caller's (selected in the same
 * INSERT … SELECT) and the cell is upserted, so concurrent PUTs of one cell
 * leave one row. Unknown or foreign channel: 400 naming `channelId`.
 */
export async function putSubscription(db: Db, o: Owner, input: { category: string; channelId: string; enabled: boolean }, now: Date) {
  const noChannel = () => badRequest("channelId", "channelId is not one of your channels in this organization");
  try {
    const result = await db.execute(sql`
      insert into notification_subscriptions (id, org_id, user_id, category, channel_id, enabled, created_at, updated_at)
      select ${newId("nsub", now.getTime())}, c.org_id, c.user_id, ${input.category}, c.id, ${input.enabled}, ${now.toISOString()}::timestamptz, ${now.toISOString()}::timestamptz
      from notification_channels c
      where c.id = ${input.channelId} and c.org_id = ${o.orgId} and c.user_id = ${o.userId}
      on conflict (user_id, org_id, category, channel_id)
      do update set enabled = excluded.enabled, updated_at = excluded.updated_at
      returning id`);
    const [hit] = rowsOf<{ id: string }>(result);
    if (!hit) throw noChannel();
    const [row] = await db.select().from(notificationSubscriptions).where(eq(notificationSubscriptions.id, hit.id));
    if (!row) throw noChannel(); // deleted with its channel in between
    return row;
  } catch (e) {
    // The channel was deleted between the SELECT and the foreign-key check.
    if (
      (e as { code?: string; cause?: { code?: string } }).code === FOREIGN_KEY_VIOLATION ||
      (e as { cause?: { code?: string } }).cause?.code === FOREIGN_KEY_VIOLATION
    )
      throw noChannel();
    throw e;
  }
}

export async function deleteSubscription(db: Db, o: Owner, id: string): Promise<void> {
  const deleted = await db
    .delete(notificationSubscriptions)
    .where(and(eq(notificationSubscriptions.id, id), eq(notificationSubscriptions.orgId, o.orgId), eq(notificationSubscriptions.userId, o.userId)))
    .returning({ id: notificationSubscriptions.id });
  if (deleted.length === 0) throw notFound("Subscription");
}

// -------------------------------------------------------------- org defaults

/** Every category, with the organization's default where it set one. */
export async function listDefaults(db: Db, orgId: string) {
  const rows = await db.select().from(notificationOrgDefaults).where(eq(notificationOrgDefaults.orgId, orgId));
  const set = new Map(rows.map((r) => [r.category, r.defaultEnabled]));
  return CATEGORIES.map((c) => ({
    category: c.id,
    defaultEnabled: set.get(c.id) ?? c.defaultEnabled,
    overridden: set.has(c.id),
  }));
}

export async function putDefault(db: Db, orgId: string, category: string, defaultEnabled: boolean, now: Date) {
  await db
    .insert(notificationOrgDefaults)
    .values({ orgId, category, defaultEnabled, updatedAt: now })
    .onConflictDoUpdate({ target: [notificationOrgDefaults.orgId, notificationOrgDefaults.category], set: { defaultEnabled, updatedAt: now } });
  return { category, defaultEnabled, overridden: true };
}
