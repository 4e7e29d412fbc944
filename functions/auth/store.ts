/** SQL of sign-in: the one live code of an address, and the token a session may be opened with. */
import { and, eq, gt, lt, sql } from "drizzle-orm";
import { apiTokens, signInCodes, users } from "../../shared/db/schema";
import type { Executor } from "../../shared/db/types";

export async function userIdByEmail(ex: Executor, email: string): Promise<string | undefined> {
  const [row] = await ex.select({ id: users.id }).from(users).where(sql`lower(${users.email}) = ${email}`).limit(1);
  return row?.id;
}

/** Stores the address's new code, replacing any earlier one (its tries start again). */
export async function putCode(
  ex: Executor,
  input: { email: string; userId: string | null; codeHash: string; salt: string; expiresAt: Date; now: Date },
): Promise<void> {
  const values = { userId: input.userId, codeHash: input.codeHash, salt: input.salt, attempts: 0, expiresAt: input.expiresAt, createdAt: input.now };
  await ex
    .insert(signInCodes)
    .values({ email: input.email, ...values })
    .onConflictDoUpdate({ target: signInCodes.email, set: values });
}

/**
 * Counts one try of the address's live code and returns it, or nothing when there
 * is none (never asked, expired, or its tries used up). The try is counted before
 * the code is compared, in one statement, so concurrent guesses cannot exceed the limit.
 */
export async function takeTry(ex: Executor, email: string, maxAttempts: number, now: Date) {
  const [row] = await ex
    .update(signInCodes)
    .set({ attempts: sql`${signInCodes.attempts} + 1` })
    .where(and(eq(signInCodes.email, email), gt(signInCodes.expiresAt, now), lt(signInCodes.attempts, maxAttempts)))
    .returning({ userId: signInCodes.userId, codeHash: signInCodes.codeHash, salt: signInCodes.salt, attempts: signInCodes.attempts });
  return row;
}

/** Deletes the code once used; false when another request used it first. */
export async function consumeCode(ex: Executor, email: string, codeHash: string): Promise<boolean> {
  const gone = await ex
    .delete(signInCodes)
    .where(and(eq(signInCodes.email, email), eq(signInCodes.codeHash, codeHash)))
    .returning({ email: signInCodes.email });
  return gone.length > 0;
}

/** Deletes expired codes (at most `limit`); called by each code request. */
export async function pruneCodes(ex: Executor, now: Date, limit = 100): Promise<void> {
  const due = ex.select({ email: signInCodes.email }).from(signInCodes).where(lt(signInCodes.expiresAt, now)).limit(limit);
  await ex.delete(signInCodes).where(sql`${signInCodes.email} in (${due})`);
}

/** A personal access token by its hash, for sign-in by token. */
export async function tokenByHash(ex: Executor, tokenHash: string) {
  const [row] = await ex
    .select({
      id: apiTokens.id,
      userId: apiTokens.userId,
      kind: apiTokens.kind,
      scopes: apiTokens.scopes,
      expiresAt: apiTokens.expiresAt,
      revokedAt: apiTokens.revokedAt,
    })
    .from(apiTokens)
    .where(eq(apiTokens.tokenHash, tokenHash))
    .limit(1);
  return row;
}
