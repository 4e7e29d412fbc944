/**
 * Sign-in limits. A code is 6 digits, lives 10 minutes and allows 5 tries; with
 * at most 5 codes an hour per address that would be 25 guesses an hour at one
 * address, for ever. Failed verifies per address are capped too: 20 in 24 hours
 * (one chance in 50,000 a day; about 1 in 137 a year of trying), after which
 * verify answers 429 until the window passes. The price: anyone can use up an
 * address's 20 and keep its owner from signing in by code for a day (a token
 * still works, and the limit never tells whether the address has an account).
 * Codes per client address bound how many addresses one client can make us
 * write to.
 */
import { sha256Hex } from "../../shared/crypto/encoding";
import type { Take } from "../notifications/rate-limit";

const MINUTE = 60_000;

export const CODE_DIGITS = 6;
export const CODE_TTL_MS = 10 * MINUTE;
export const CODE_MAX_ATTEMPTS = 5;

export const LOGIN_LIMITS = {
  perAddress: { max: 5, windowMs: 60 * MINUTE },
  perClient: { max: 30, windowMs: 60 * MINUTE },
};

export const LOGIN_LIMIT_TEXT = `${LOGIN_LIMITS.perAddress.max} codes per hour per e-mail address and ${LOGIN_LIMITS.perClient.max} per hour per client address`;

/** The rate-limit takes of one code request; the address is keyed by its hash, so rate_limits holds no e-mail address. */
export function loginTakes(email: string, client: string | undefined): Take[] {
  const takes: Take[] = [{ key: `auth:login:email:${sha256Hex(email)}`, ...LOGIN_LIMITS.perAddress }];
  if (client) takes.push({ key: `auth:login:client:${client}`, ...LOGIN_LIMITS.perClient });
  return takes;
}

/** Failed verifies per e-mail address: a fixed window from the first failure counted. */
export const VERIFY_FAILURE_LIMIT = { max: 20, windowMs: 24 * 60 * MINUTE };

export const VERIFY_FAILURE_TEXT = `${VERIFY_FAILURE_LIMIT.max} wrong codes per e-mail address in 24 hours`;

/** The rate-limit take of one verify (keyed by the address's hash, like loginTakes). */
export function verifyFailureTake(email: string): Take {
  return { key: `auth:verify:fail:email:${sha256Hex(email)}`, ...VERIFY_FAILURE_LIMIT };
}
