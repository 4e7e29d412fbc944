/**
 * Route rules as the API reads and writes them. One request shape per kind
 * (a discriminated union on `kind`: an unknown kind is a 400 naming `kind` with
 * the allowed ones), each with an optional `path` and `enabled`.
 */
import { z } from "@hono/zod-openapi";
import { ROUTE_RULE_KINDS } from "../../shared/db/schema";
import { cidrProblem } from "../../shared/net/cidr";
import { MAX_PATTERN } from "./path-match";

/** Rules per project: the edge evaluates each request against all of them. */
export const MAX_RULES_PER_PROJECT = 50;
/** CIDR blocks in one allow-deny rule. */
export const MAX_CIDRS = 100;

const Cidr = z
  .string()
  .max(64)
  .superRefine((v, ctx) => {
    const problem = cidrProblem(v);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .openapi({ description: "An IPv4 or IPv6 address or CIDR block (`203.0.113.0/24`, `2001:db8::/32`, `198.51.100.7`)", example: "203.0.113.0/24" });

const Path = z
  .string()
  .min(1)
  .max(MAX_PATTERN)
  .regex(/^\/[\x21-\x7e]*$/, "must start with '/' and contain printable ASCII without spaces")
  .nullable()
  .openapi({
    description:
      "Which request paths the rule applies to (the query string is not part of it); null or omitted: every path. A plain path is a prefix on segment boundaries (`/api` matches `/api` and `/api/…`, not `/apix`); with `*` it is a glob: `*` within one segment, `**` across segments (`/static/*.js`, `/admin/**`)",
    example: "/api",
  });

const common = {
  path: Path.optional(),
  enabled: z.boolean().optional().openapi({ description: "Default true; a disabled rule is kept but not evaluated" }),
};

export const RateLimitFields = {
  limit: z.number().int().min(1).max(1_000_000).openapi({ description: "Requests allowed per window and client address (≥ 1)" }),
  windowSeconds: z.number().int().min(1).max(86_400).openapi({ description: "Window length in seconds (1 s to 1 day)" }),
  by: z.literal("ip").default("ip").openapi({ description: "What is counted: the client address (`ip`, the only key for now)" }),
};
export const BanFields = {
  cidr: Cidr,
  expiresAt: z.iso.datetime({ offset: true }).nullable().optional().openapi({ description: "When the ban ends (ISO 8601); null or omitted: never" }),
  reason: z.string().max(500).nullable().optional().openapi({ description: "A note for operators; never shown to the banned client" }),
};
export const AllowDenyFields = {
  mode: z.enum(["allow", "deny"]).openapi({ description: "`allow`: only these blocks pass (everyone else 403); `deny`: these blocks get 403" }),
  cidrs: z.array(Cidr).min(1).max(MAX_CIDRS),
};

export const CreateRuleBody = z
  .discriminatedUnion("kind", [
    z.strictObject({ kind: z.literal("rate-limit"), ...common, ...RateLimitFields }).openapi("RouteRuleRateLimitCreate"),
    z.strictObject({ kind: z.literal("ban"), ...common, ...BanFields }).openapi("RouteRuleBanCreate"),
    z.strictObject({ kind: z.literal("allow-deny"), ...common, ...AllowDenyFields }).openapi("RouteRuleAllowDenyCreate"),
  ])
  .openapi("RouteRuleCreate");
export type CreateRule = z.infer<typeof CreateRuleBody>;

/** PATCH: any field of the rule's own kind; `kind` itself cannot change (delete and create instead). */
export const UpdateRuleBody = z
  .strictObject({
    ...common,
    limit: RateLimitFields.limit.optional(),
    windowSeconds: RateLimitFields.windowSeconds.optional(),
    by: z.literal("ip").optional(),
    cidr: BanFields.cidr.optional(),
    expiresAt: BanFields.expiresAt,
    reason: BanFields.reason,
    mode: AllowDenyFields.mode.optional(),
    cidrs: AllowDenyFields.cidrs.optional(),
  })
  .openapi("RouteRuleUpdate");
export type UpdateRule = z.infer<typeof UpdateRuleBody>;

export const RouteRuleSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    kind: z.enum(ROUTE_RULE_KINDS),
    path: z.string().nullable(),
    enabled: z.boolean(),
    limit: z.number().int().optional(),
    windowSeconds: z.number().int().optional(),
    by: z.literal("ip").optional(),
    cidr: z.string().optional(),
    expiresAt: z.string().nullable().optional(),
    reason: z.string().nullable().optional(),
    mode: z.enum(["allow", "deny"]).optional(),
    cidrs: z.array(z.string()).optional(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("RouteRule", {
    description:
      "A route rule: the common fields plus those of its kind (rate-limit: limit, windowSeconds, by; ban: cidr, expiresAt, reason; allow-deny: mode, cidrs)",
  });
export type RouteRuleView = z.infer<typeof RouteRuleSchema>;

/** Fields of each kind, for PATCH: a field of another kind is a 400 naming it. */
export const KIND_FIELDS: Record<(typeof ROUTE_RULE_KINDS)[number], readonly string[]> = {
  "rate-limit": Object.keys(RateLimitFields),
  ban: Object.keys(BanFields),
  "allow-deny": Object.keys(AllowDenyFields),
};
