/**
 * A per-process cache of token lookups (the Node adapter's hot path: without it
 * every request pays a second database round trip before its own query).
 *
 * Correctness rests on invalidation, not on the TTL:
 * - database triggers NOTIFY `workspace_auth` with the user id whenever a token,
 *   membership or user row changes (migrations/0003_auth_notify.sql), and every
 *   process LISTENs (auth-cache-listener.ts), so out-of-band and other processes'
 *   changes evict within milliseconds;
 * - the identity routes also evict synchronously after their own writes, so a
 *   demotion or revocation made through this process holds on the very next request;
 * - a lookup that raced an invalidation is not stored (the generation check);
 * - if the listener loses its connection the cache is cleared and bypassed until
 *   it is back.
 * Only complete answers (a valid token of a member of the active organization)
 * are cached; failures always go to the database. The TTL is a safety net.
 */
import type { TokenKind } from "../db/schema";

export interface AuthRow {
  tokenId: string;
  userId: string;
  scopes: string[] | null;
  expiresAt: Date | null;
  revokedAt: Date | null;
  kind: TokenKind;
  projectId: string | null;
  tokenOrg: string | null;
  memberOrg: string | null;
  role: "owner" | "admin" | "member" | "viewer" | null;
}

export const AUTH_CHANNEL = "workspace_auth";

export class AuthCache {
  private readonly entries = new Map<string, { row: AuthRow; storedAt: number }>();
  private readonly keysByUser = new Map<string, Set<string>>();
  private gen = 0;
  private active = true;

  constructor(private readonly opts: { ttlMs?: number; maxEntries?: number } = {}) {}

  get size(): number {
    return this.entries.size;
  }

  /** Bumped by every invalidation; a lookup started under an older one is not stored. */
  get generation(): number {
    return this.gen;
  }

  get(key: string, now: number): AuthRow | undefined {
    if (!this.active) return undefined;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (now - entry.storedAt > (this.opts.ttlMs ?? 60_000)) {
      this.drop(key, entry.row.userId);
      return undefined;
    }
    return entry.row;
  }

  set(key: string, row: AuthRow, startedAtGeneration: number, now: number): void {
    if (!this.active || startedAtGeneration !== this.gen) return;
    if (this.entries.size >= (this.opts.maxEntries ?? 10_000)) this.invalidate();
    this.entries.set(key, { row, storedAt: now });
    let keys = this.keysByUser.get(row.userId);
    if (!keys) {
      keys = new Set();
      this.keysByUser.set(row.userId, keys);
    }
    keys.add(key);
  }

  /** Evicts one user's entries, or everything when no user is named. */
  invalidate(userId?: string): void {
    this.gen++;
    if (userId === undefined) {
      this.entries.clear();
      this.keysByUser.clear();
      return;
    }
    for (const key of this.keysByUser.get(userId) ?? []) this.entries.delete(key);
    this.keysByUser.delete(userId);
  }

  /** While the change feed is down nothing is served from or stored in the cache. */
  setActive(active: boolean): void {
    this.invalidate();
    this.active = active;
  }

  private drop(key: string, userId: string): void {
    this.entries.delete(key);
    this.keysByUser.get(userId)?.delete(key);
  }
}
