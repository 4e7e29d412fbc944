/**
 * Route rules as the edge applies them, in the documented order: enabled rules
 * whose path matches; bans first, then allow-deny, then rate limits; the first
 * that refuses decides. Rate limits count in the shared `rate_limits` table
 * (one atomic upsert per request with a matching rule), so every adapter
 * process on one Postgres shares one count per rule and client address.
 *
 * Rules match the normalized request path (request-path.ts): a rule applies
 * when it matches any of the forms given (the path, its `%2F`-decoded form and
 * its form without `;` parameters). No form at all means the path is one app
 * servers read in different ways (a control character, `%5C`, `%3B`, a segment
 * ending in `.` or a space): 400 before any rule, whatever rules the project
 * has, so it never reaches the app.
 *
 * Rate limits count an IPv6 client by its /64: one subscriber, host or VM is
 * normally given a whole /64 (RFC 6177, SLAAC), so keying by the full address
 * would let one client take 2^64 fresh counters by rotating its interface id.
 * IPv4 clients count by their address.
 */
import { type Address, type Cidr, cidrContains, parseCidr } from "../../../shared/net/cidr";
import { retryAfterSeconds } from "../../notifications/rate-limit";
import type { TakeOne, TakeResult } from "./rate-batcher";
import { pathMatches } from "../../route-rules/path-match";
import type { EdgeReason } from "./pages";
import type { EdgeRule } from "./store";

export interface Refusal {
  reason: EdgeReason;
  /** The refusing rule; null for a path refused before any rule. */
  ruleId: string | null;
  headers: Record<string, string>;
}

/** Parsed blocks per rule object (rules are replaced, never mutated, when the table reloads). */
const parsed = new WeakMap<EdgeRule, Cidr[]>();
function blocksOf(rule: EdgeRule): Cidr[] {
  let blocks = parsed.get(rule);
  if (!blocks) {
    const config = rule.config as { cidr?: string; cidrs?: string[] };
    const texts = config.cidrs ?? (config.cidr ? [config.cidr] : []);
    blocks = texts.map(parseCidr).filter((c): c is Cidr => c !== null);
    parsed.set(rule, blocks);
  }
  return blocks;
}

/** The rate-limit counter's client part: an IPv4 address, or an IPv6 client's /64 (`2001:db8:0:1::/64`). */
export function rateLimitClient(client: { text: string; address: Address | null }): string {
  const a = client.address;
  if (a?.family !== 6) return client.text;
  const top = a.value >> 64n;
  const groups = [48n, 32n, 16n, 0n].map((shift) => ((top >> shift) & 0xffffn).toString(16));
  return `${groups.join(":")}::/64`;
}

const inAny = (rule: EdgeRule, client: Address | null) => client !== null && blocksOf(rule).some((c) => cidrContains(c, client));

/** A ban's expiry in ms (Infinity: none), parsed once per rule object. */
const expiries = new WeakMap<EdgeRule, number>();
function expiryOf(rule: EdgeRule): number {
  let at = expiries.get(rule);
  if (at === undefined) {
    const { expiresAt } = rule.config as { expiresAt: string | null };
    at = expiresAt ? Date.parse(expiresAt) : Number.POSITIVE_INFINITY;
    expiries.set(rule, at);
  }
  return at;
}

/**
 * Which of a project's rules match a request's path forms, remembered per rules array (replaced, never
 * mutated, when the table reloads) and path: a glob rule is an NFA run over the path (path-match.ts), and
 * the same few paths of an app come again and again. Bounded: paths over MAX_CACHED_PATH characters are
 * not remembered, and past MAX_CACHED entries in all the cache starts over. A pure function of its key,
 * so a client varying paths only costs the matching it would have cost anyway.
 */
const MAX_CACHED = 10_000;
const MAX_CACHED_PATH = 512;
let matchCache = new WeakMap<EdgeRule[], Map<string, EdgeRule[]>>();
let cachedEntries = 0;
function matchingRules(rules: EdgeRule[], paths: readonly string[]): EdgeRule[] {
  // A newline cannot be in a form (control characters are refused before any rule), so it separates them.
  const key = paths.length === 1 ? paths[0]! : paths.join("\n");
  if (key.length > MAX_CACHED_PATH) return rules.filter((r) => paths.some((p) => pathMatches(r.path, p)));
  let byPath = matchCache.get(rules);
  const hit = byPath?.get(key);
  if (hit) return hit;
  const matching = rules.filter((r) => paths.some((p) => pathMatches(r.path, p)));
  if (cachedEntries >= MAX_CACHED) {
    matchCache = new WeakMap();
    cachedEntries = 0;
    byPath = undefined;
  }
  if (!byPath) {
    byPath = new Map();
    matchCache.set(rules, byPath);
  }
  byPath.set(key, matching);
  cachedEntries++;
  return matching;
}

/** A rate-limit rule as the take needs it: its counter key's prefix (the client follows), limit and window. */
interface Limit {
  ruleId: string;
  prefix: string;
  max: number;
  windowMs: number;
}

/** The rate limits among a path's matching rules, remembered per matching array (itself remembered per path). */
const limitsCache = new WeakMap<EdgeRule[], Limit[]>();
function limitsOf(matching: EdgeRule[]): Limit[] {
  let limits = limitsCache.get(matching);
  if (!limits) {
    limits = matching
      .filter((r) => r.kind === "rate-limit")
      .map((rule) => {
        const { limit, windowSeconds } = rule.config as { limit: number; windowSeconds: number };
        return { ruleId: rule.id, prefix: `edge:${rule.id}:`, max: limit, windowMs: windowSeconds * 1000 };
      });
    limitsCache.set(matching, limits);
  }
  return limits;
}

/**
 * Synchronous unless a rate limit has to wait for the database (rate-batcher.ts grants from a lease at once):
 * the edge's hot path then costs no promise.
 */
export function evaluateRules(
  take: TakeOne,
  rules: EdgeRule[],
  client: { text: string; address: Address | null },
  paths: readonly string[],
  now: Date,
): Refusal | null | Promise<Refusal | null> {
  if (paths.length === 0) return { reason: "bad_request", ruleId: null, headers: {} };
  const matching = matchingRules(rules, paths);
  if (matching.length === 0) return null;
  for (const rule of matching) {
    if (rule.kind !== "ban") continue;
    if (expiryOf(rule) <= now.getTime()) continue;
    if (inAny(rule, client.address)) return { reason: "banned", ruleId: rule.id, headers: {} };
  }
  for (const rule of matching) {
    if (rule.kind !== "allow-deny") continue;
    const { mode } = rule.config as { mode: "allow" | "deny" };
    const listed = inAny(rule, client.address);
    if (mode === "allow" ? !listed : listed) return { reason: "denied", ruleId: rule.id, headers: {} };
  }
  const limits = limitsOf(matching);
  if (limits.length === 0) return null;
  const who = rateLimitClient(client);
  const at = now.getTime();
  // Every take is made before any answer is looked at: each rule counts this request.
  const granted: Array<TakeResult | Promise<TakeResult>> = new Array(limits.length);
  let waiting = false;
  for (let i = 0; i < limits.length; i++) {
    const l = limits[i]!;
    const g = take(l.prefix + who, l.max, l.windowMs, at);
    if (g instanceof Promise) waiting = true;
    granted[i] = g;
  }
  if (waiting) return Promise.all(granted).then((all) => firstRefusal(limits, all, at));
  return firstRefusal(limits, granted as TakeResult[], at);
}

function firstRefusal(limits: Limit[], granted: TakeResult[], now: number): Refusal | null {
  for (let i = 0; i < limits.length; i++) {
    const g = granted[i]!;
    if (!g.ok) {
      const reset = retryAfterSeconds(new Date(g.windowEnd), new Date(now));
      return {
        reason: "rate_limited",
        ruleId: limits[i]!.ruleId,
        // IETF httpapi-ratelimit-headers (draft) names, and Retry-After.
        headers: { "retry-after": String(reset), "ratelimit-limit": String(limits[i]!.max), "ratelimit-remaining": "0", "ratelimit-reset": String(reset) },
      };
    }
  }
  return null;
}
