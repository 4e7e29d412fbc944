/**
 * Sign-in limits. A code is 6 digits, lives 10 minutes and allows 5 tries; with
 * at most 5 codes an hour per address that is 25 guesses an hour at one address
 * (one chance in 40,000). Codes per client address bound how many addresses one
 * client can make us write to.
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
export async function loginTakes(email: string, client: string | undefined): Promise<Take[]> {
  const takes: Take[] = [{ key: `auth:login:email:${await sha256Hex(email)}`, ...LOGIN_LIMITS.perAddress }];
  if (client) takes.push({ key: `auth:login:client:${client}`, ...LOGIN_LIMITS.perClient });
  return takes;
}
