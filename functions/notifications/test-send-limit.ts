/**
 * The rate limit of POST channels/:id/test: a unit of the channel's and of the
 * organization's test-send budget, both or neither (a unit taken from one when
 * the other is exhausted is given back). Over the limit: 429 problem+json with
 * `Retry-After` (seconds until the exhausted window ends).
 */
import type { AppContext } from "../../shared/http/context";
import { tooManyRequests } from "../../shared/http/errors";
import { rateLimitedResponse } from "../../shared/http/problem-schema";
import { describeLimit, TEST_SEND_LIMITS, testSendTakes } from "./limits";
import { takeApiLimits } from "./rate-limit";

export const TEST_SEND_LIMIT_TEXT = `${describeLimit(TEST_SEND_LIMITS.perChannel)} per channel and ${describeLimit(TEST_SEND_LIMITS.perOrg)} per organization`;

/** The OpenAPI description of the 429 answer. */
export const TOO_MANY_TEST_SENDS = rateLimitedResponse(
  `Test sends are limited to ${TEST_SEND_LIMIT_TEXT}; \`Retry-After\` says when to try again`,
  "Seconds until a test send is allowed again",
);

/** null: the send may go ahead; otherwise how long to wait. */
export async function takeTestSend(
  c: AppContext,
  orgId: string,
  channelId: string,
  now: Date,
): Promise<{ retryAfter: number; scope: "channel" | "organization" } | null> {
  const takes = testSendTakes(orgId, channelId);
  const limited = await takeApiLimits(c, takes, now);
  if (!limited) return null;
  return { retryAfter: limited.retryAfter, scope: limited.denied === takes[0] ? "channel" : "organization" };
}

/** The 429 problem. */
export function tooManyTestSends(limited: { retryAfter: number; scope: "channel" | "organization" }) {
  return tooManyRequests(
    `Too many test sends for this ${limited.scope}: the limit is ${TEST_SEND_LIMIT_TEXT}. Try again in ${limited.retryAfter} s.`,
    limited.retryAfter,
  );
}
