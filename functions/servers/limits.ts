/**
 * Rate limits of the build-server routes, kept in Postgres (functions/notifications/rate-limit.ts)
 * so they hold across processes and Worker invocations: registrations per organization (each
 * mints a token and a row), heartbeats per server (a runner sends one every few seconds; more
 * is a loop gone wrong). Over the limit: 429 problem+json with `Retry-After`.
 */
import type { AppContext } from "../../shared/http/context";
import { tooManyRequests } from "../../shared/http/errors";
import { rateLimitedResponse } from "../../shared/http/problem-schema";
import { describeLimit } from "../notifications/limits";
import { type RateLimit, takeApiLimits } from "../notifications/rate-limit";

const MINUTE = 60_000;

export const SERVER_LIMITS = {
  registrationsPerOrg: { max: 30, windowMs: 60 * MINUTE },
  heartbeatsPerServer: { max: 60, windowMs: MINUTE },
  /** A long poll answers at once when there is work: a few claims a second at most. */
  claimsPerServer: { max: 240, windowMs: MINUTE },
  /** Renewals, transitions, log batches, reads of a job and serving reports, all jobs of a server together. */
  jobCallsPerServer: { max: 1200, windowMs: MINUTE },
} as const satisfies Record<string, RateLimit>;

const REGISTRATIONS_TEXT = `${describeLimit(SERVER_LIMITS.registrationsPerOrg)} per organization`;
const HEARTBEATS_TEXT = `${describeLimit(SERVER_LIMITS.heartbeatsPerServer)} per server`;
const CLAIMS_TEXT = `${describeLimit(SERVER_LIMITS.claimsPerServer)} per server`;
const JOB_CALLS_TEXT = `${describeLimit(SERVER_LIMITS.jobCallsPerServer)} per server`;

export const TOO_MANY_REGISTRATIONS = rateLimitedResponse(
  `Registrations are limited to ${REGISTRATIONS_TEXT}; \`Retry-After\` says when to try again`,
  "Seconds until a registration is allowed again",
);
export const TOO_MANY_HEARTBEATS = rateLimitedResponse(
  `Heartbeats are limited to ${HEARTBEATS_TEXT}; \`Retry-After\` says when to send the next`,
  "Seconds until a heartbeat is accepted again",
);

export const TOO_MANY_CLAIMS = rateLimitedResponse(
  `Claims are limited to ${CLAIMS_TEXT}; \`Retry-After\` says when to claim again`,
  "Seconds until a claim is accepted again",
);
export const TOO_MANY_JOB_CALLS = rateLimitedResponse(
  `Job calls (renewals, transitions, log batches, reads, serving reports) are limited to ${JOB_CALLS_TEXT}; \`Retry-After\` says when to try again`,
  "Seconds until a job call is accepted again",
);

/** One unit of a limit; RateLimit-* headers on the answer (takeApiLimits), 429 past it. */
async function take(c: AppContext, key: string, limit: RateLimit, now: Date, what: string): Promise<void> {
  const limited = await takeApiLimits(c, [{ key, ...limit }], now);
  if (!limited) return;
  throw tooManyRequests(`Too many ${what}. Try again in ${limited.retryAfter} s.`, limited.retryAfter);
}

export const takeRegistration = (c: AppContext, orgId: string, now: Date) =>
  take(c, `servers:register:org:${orgId}`, SERVER_LIMITS.registrationsPerOrg, now, `server registrations: the limit is ${REGISTRATIONS_TEXT}`);

export const takeHeartbeat = (c: AppContext, serverId: string, now: Date) =>
  take(c, `runner:heartbeat:${serverId}`, SERVER_LIMITS.heartbeatsPerServer, now, `heartbeats: the limit is ${HEARTBEATS_TEXT}`);

export const takeClaim = (c: AppContext, serverId: string, now: Date) =>
  take(c, `runner:claim:${serverId}`, SERVER_LIMITS.claimsPerServer, now, `claims: the limit is ${CLAIMS_TEXT}`);

export const takeJobCall = (c: AppContext, serverId: string, now: Date) =>
  take(c, `runner:job:${serverId}`, SERVER_LIMITS.jobCallsPerServer, now, `job calls: the limit is ${JOB_CALLS_TEXT}`);
