/**
 * A token never outlives the token that minted it: whoever holds a short-lived
 * token must not be able to turn it into a lasting one. Applies to personal
 * tokens (POST /api/tokens) and deployment-session tokens alike.
 */
import { eq } from "drizzle-orm";
import { apiTokens } from "../db/schema";
import type { Executor } from "../db/types";

/** The earlier of two expiries; null means "never expires". */
export function earliestExpiry(a: Date | null, b: Date | null): Date | null {
  if (!a) return b;
  if (!b) return a;
  return a <= b ? a : b;
}

/** `wanted` (null: no expiry) capped at the expiry of the calling token `parentId`. */
export async function capToParent(db: Executor, parentId: string, wanted: Date): Promise<Date>;
export async function capToParent(db: Executor, parentId: string, wanted: Date | null): Promise<Date | null>;
export async function capToParent(db: Executor, parentId: string, wanted: Date | null): Promise<Date | null> {
  const [parent] = await db.select({ expiresAt: apiTokens.expiresAt }).from(apiTokens).where(eq(apiTokens.id, parentId)).limit(1);
  return earliestExpiry(wanted, parent?.expiresAt ?? null);
}
