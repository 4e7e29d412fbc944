/**
 * The numbers behind the notification rate limits (documented in docs/notifications.md,
 * "Rate limits"). E-mail and webhooks reach addresses the tenant chose, with
 * text the tenant wrote, from our servers: limits bound what one channel and
 * one organization can make us send. in_app sends reach only our own feed and
 * are not limited.
 */
import type { ChannelKind } from "../../shared/db/schema";
import type { RateLimit, Take } from "./rate-limit";

const MINUTE = 60_000;

/** POST channels/:id/test: per channel and per organization. */
export const TEST_SEND_LIMITS = {
  perChannel: { max: 5, windowMs: 10 * MINUTE },
  perOrg: { max: 30, windowMs: 60 * MINUTE },
} as const satisfies Record<string, RateLimit>;

/**
 * Deliveries by the engine. The per-organization ceilings are well above a
 * legitimate fan-out (one event to 5,000 members' webhooks passes in one
 * window); e-mail, where abuse costs reputation, has the lower one.
 */
export interface DeliveryLimits {
  perChannel: RateLimit;
  perOrgEmail: RateLimit;
  perOrgOther: RateLimit;
}

export const DELIVERY_LIMITS: DeliveryLimits = {
  perChannel: { max: 60, windowMs: MINUTE },
  perOrgEmail: { max: 1_000, windowMs: MINUTE },
  perOrgOther: { max: 10_000, windowMs: MINUTE },
};

export function testSendTakes(orgId: string, channelId: string): Take[] {
  return [
    { key: `test:channel:${channelId}`, ...TEST_SEND_LIMITS.perChannel },
    { key: `test:org:${orgId}`, ...TEST_SEND_LIMITS.perOrg },
  ];
}

/** The keys one delivery takes a unit of: its channel's, and its organization's for the kind. */
export function deliveryTakes(limits: DeliveryLimits, orgId: string, channelId: string, kind: ChannelKind): [Take, Take] {
  const email = kind === "email";
  return [
    { key: `send:channel:${channelId}`, ...limits.perChannel },
    { key: `send:org:${orgId}:${email ? "email" : "http"}`, ...(email ? limits.perOrgEmail : limits.perOrgOther) },
  ];
}

export const describeLimit = (l: RateLimit) => {
  const minutes = l.windowMs / MINUTE;
  const per = minutes === 60 ? "hour" : minutes === 1 ? "minute" : Number.isInteger(minutes) ? `${minutes} minutes` : `${l.windowMs / 1000} s`;
  return `${l.max.toLocaleString("en-US")} per ${per}`;
};

/** For route descriptions. */
export const DELIVERY_LIMIT_TEXT = `${describeLimit(DELIVERY_LIMITS.perChannel)} per channel; per organization, e-mail ${describeLimit(DELIVERY_LIMITS.perOrgEmail)} and webhook and chat sends ${describeLimit(DELIVERY_LIMITS.perOrgOther)}`;
