/** The OpenAPI shape of every error response, shared by all routes. */
import { z } from "@hono/zod-openapi";

export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    field: z.string().optional().openapi({ description: "Dotted path of the offending request field" }),
    allowed: z.array(z.union([z.string(), z.number(), z.boolean(), z.null()])).optional(),
    step: z.string().optional().openapi({ description: "A transfer's step that failed (transfer routes only)" }),
    requestId: z.string().optional(),
  })
  .openapi("Problem");

export const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: ProblemSchema } },
});

export const ERROR_RESPONSES = {
  400: problem("Validation failed; `field` names the offending field"),
  401: problem("Missing, malformed, expired or revoked token"),
  403: problem("The token or role lacks the route's permission tag, or the caller is not a member of the organization"),
  404: problem("Not found, or not visible to the caller"),
  500: problem("Unexpected error; quote `requestId` when reporting it"),
} as const;

/** A 429 answer: the problem body and the `Retry-After` header (seconds). */
export const tooManyRequestsResponse = (description: string, retryAfter: string) => ({
  ...problem(description),
  headers: { "Retry-After": { description: retryAfter, schema: { type: "integer" as const, minimum: 1 } } },
});

const count = { type: "integer" as const, minimum: 0 };

/**
 * The 429 of a rate-limited operation (a window counted in `rate_limits`): `Retry-After` and the
 * IETF draft's `RateLimit-*` fields, which every answer of such an operation carries
 * (setRateLimitHeaders in functions/notifications/rate-limit.ts).
 */
export const rateLimitedResponse = (description: string, retryAfter: string) => {
  const base = tooManyRequestsResponse(description, retryAfter);
  return {
    ...base,
    headers: {
      ...base.headers,
      "RateLimit-Limit": {
        description: "The operation's tightest limit (units per window); on every answer of this operation, not only the 429",
        schema: count,
      },
      "RateLimit-Remaining": { description: "Units left in that limit's window; on every answer of this operation", schema: count },
      "RateLimit-Reset": { description: "Seconds until that window ends (on a 429 equal to `Retry-After`); on every answer of this operation", schema: count },
    },
  };
};
