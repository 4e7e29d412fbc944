/**
 * A token never outlives the token or cookie session that minted it: whoever
 * holds a short-lived token or a stolen cookie must not be able to turn it into
 * a lasting one. Applies to personal tokens (POST /api/tokens), deployment-session
 * and log-stream tokens alike. Ending the parent (revoking the token, logging
 * out) does not revoke what it minted meanwhile: those live to their own capped
 * expiry unless revoked themselves.
 */
import { eq } from "drizzle-orm";
import { apiTokens, sessions } from "../db/schema";
import type { Executor } from "../db/types";

/** The earlier of two expiries; null means "never expires". */
export function earliestExpiry(a: Date | null, b: Date | null): Date | null {
  if (!a) return b;
  if (!b) return a;
  return a <= b ? a : b;
}

/**
 * `wanted` (null: no expiry) capped at the expiry of the caller's `parentId`: a
 * token, or a cookie session (Caller.tokenId is the session's id then), whose
 * absolute expiry is the cap.
 */
export async function capToParent(db: Executor, parentId: string, wanted: Date): Promise<Date>;
export async function capToParent(db: Executor, parentId: string, wanted: Date | null): Promise<Date | null>;
export async function capToParent(db: Executor, parentId: string, wanted: Date | null): Promise<Date | null> {
  const [parent] = await db
    .select({ expiresAt: apiTokens.expiresAt })
    .from(apiTokens)
    .where(eq(apiTokens.id, parentId))
    .unionAll(db.select({ expiresAt: sessions.expiresAt }).from(sessions).where(eq(sessions.id, parentId)))
    .limit(1);
  return earliestExpiry(wanted, parent?.expiresAt ?? null);
}
