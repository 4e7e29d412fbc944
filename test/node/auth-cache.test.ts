/**
 * The Node adapter's cache of token lookups: it must never let a demoted,
 * removed or revoked caller keep access beyond the database's notification.
 */
import { eq, and } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AuthCache, type AuthRow } from "../../shared/auth/auth-cache";
import { listenPostgres, type Stoppable } from "../../shared/auth/auth-cache-listener";
import { createKeyring } from "../../shared/crypto/keyring";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { apiTokens, memberships } from "../../shared/db/schema";
import { silentLogger } from "../../shared/http/logger";
import { createApp } from "../../functions/app";
import { issueToken } from "../../functions/identity/store";
import { buildRequest, eventually, expectProblem, expectStatus, seedMember, seedTenant, type Harness } from "../support/harness";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const row = (userId: string): AuthRow => ({
  tokenId: "tok_1",
  userId,
  scopes: null,
  expiresAt: null,
  revokedAt: null,
  kind: "personal",
  projectId: null,
  tokenOrg: null,
  memberOrg: "org_1",
  role: "owner",
});

describe("AuthCache", () => {
  it("does not store a lookup that raced an invalidation", () => {
    const cache = new AuthCache();
    const started = cache.generation;
    cache.invalidate("usr_other");
    cache.set("k", row("usr_1"), started, 0);
    expect(cache.get("k", 0)).toBeUndefined();
    cache.set("k", row("usr_1"), cache.generation, 0);
    expect(cache.get("k", 0)?.userId).toBe("usr_1");
  });

  it("evicts one user's entries, or all", () => {
    const cache = new AuthCache();
    cache.set("a1", row("usr_a"), cache.generation, 0);
    cache.set("a2", row("usr_a"), cache.generation, 0);
    cache.set("b", row("usr_b"), cache.generation, 0);
    cache.invalidate("usr_a");
    expect([cache.get("a1", 0), cache.get("a2", 0)]).toEqual([undefined, undefined]);
    expect(cache.get("b", 0)).toBeDefined();
    cache.invalidate();
    expect(cache.size).toBe(0);
  });

  it("expires entries after the TTL and stays bounded", () => {
    const cache = new AuthCache({ ttlMs: 100, maxEntries: 2 });
    cache.set("a", row("usr_a"), cache.generation, 0);
    expect(cache.get("a", 100)).toBeDefined();
    expect(cache.get("a", 101)).toBeUndefined();
    for (const k of ["x", "y", "z"]) cache.set(k, row(`usr_${k}`), cache.generation, 0);
    expect(cache.size).toBeLessThanOrEqual(2);
  });

  it("serves and stores nothing while its change feed is down", () => {
    const cache = new AuthCache();
    cache.set("a", row("usr_a"), cache.generation, 0);
    cache.setActive(false);
    expect(cache.get("a", 0)).toBeUndefined();
    cache.set("a", row("usr_a"), cache.generation, 0);
    expect(cache.size).toBe(0);
    cache.setActive(true);
    cache.set("a", row("usr_a"), cache.generation, 0);
    expect(cache.get("a", 0)).toBeDefined();
  });
});

describe.runIf(inject("pgKind") === "postgres")("cached token lookups on Postgres", () => {
  let database: PostgresDatabase;
  let feed: Stoppable;
  let h: Harness;
  const cache = new AuthCache();

  beforeAll(async () => {
    database = await openPostgres(inject("pgUrl"), { migrate: false, max: 5 });
    feed = await listenPostgres(inject("pgUrl"), cache);
    const keyring = await createKeyring(TEST_SECRET_KEYS);
    const app = createApp({
      services: () => ({ db: database.db, keyring, config: { mode: "self-hosted", sharedDomain: "apps.test" }, authCache: cache }),
      logger: silentLogger,
    });
    h = {
      runtime: "node-postgres",
      realConcurrency: true,
      db: database.db,
      keyring,
      logs: [],
      request: async (p, i) => app.fetch(buildRequest(p, i)),
      close: async () => {},
    };
  });
  afterAll(async () => {
    await feed.stop();
    await database.close();
  });

  it("caches a member's lookup and drops it when the role changes behind the API's back", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    const invite = () => h.request(`/api/orgs/${t.orgId}/invitations`, { token: admin.token, json: { email: `x${Date.now()}@example.test`, role: "viewer" } });
    await expectStatus(await invite(), 201);
    const before = cache.size;
    await expectStatus(await invite(), 201);
    expect(cache.size).toBe(before); // served from the cache, nothing new stored

    await database.db
      .update(memberships)
      .set({ role: "viewer" })
      .where(and(eq(memberships.orgId, t.orgId), eq(memberships.userId, admin.userId)));
    await eventually(async () => expectProblem(await invite(), 403), 2000);
  });

  it("a token revoked or a member removed behind the API's back loses access within the notification", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    await expectStatus(await h.request("/api/settings", { token: member.token }), 200);
    await database.db.update(apiTokens).set({ revokedAt: new Date() }).where(eq(apiTokens.userId, member.userId));
    await eventually(async () => expectProblem(await h.request("/api/settings", { token: member.token }), 401), 2000);

    const other = await seedMember(h, t.orgId, "member");
    await expectStatus(await h.request("/api/settings", { token: other.token, org: t.orgId }), 200);
    await database.db.delete(memberships).where(and(eq(memberships.orgId, t.orgId), eq(memberships.userId, other.userId)));
    await eventually(async () => expectProblem(await h.request("/api/settings", { token: other.token, org: t.orgId }), 403), 2000);
  });

  it("a cached token stops at its expiry, and a token differing by one character is not its cache entry", async () => {
    const t = await seedTenant(h);
    let now = Date.now();
    const app = createApp({
      services: () => ({ db: database.db, keyring: h.keyring, config: { mode: "self-hosted", sharedDomain: "apps.test" }, authCache: cache }),
      logger: silentLogger,
      clock: () => new Date(now),
    });
    const { token } = await issueToken(database.db, { userId: t.userId, name: "short-lived", scopes: null, expiresAt: new Date(now + 3_600_000) });
    const settings = (tok: string) => app.fetch(buildRequest("/api/settings", { token: tok }));
    await expectStatus(await settings(token), 200);
    const cached = cache.size;
    await expectStatus(await settings(token), 200);
    expect(cache.size).toBe(cached); // the second answer came from the cache
    const altered = token.slice(0, -1) + (token.endsWith("a") ? "b" : "a");
    await expectProblem(await settings(altered), 401);
    now += 3_600_001;
    await expectProblem(await settings(token), 401);
  });

  it("changes made through the API hold on the very next request", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    const members = () => h.request(`/api/orgs/${t.orgId}/members/${t.userId}`, { method: "PATCH", token: admin.token, json: { role: "owner" } });
    await expectProblem(await members(), 403); // warms the cache: an admin may not touch owners
    await expectStatus(await h.request(`/api/orgs/${t.orgId}/members/${admin.userId}`, { method: "PATCH", token: t.token, json: { role: "viewer" } }), 200);
    await expectProblem(await h.request(`/api/orgs/${t.orgId}/invitations`, { token: admin.token, json: { email: "y@example.test", role: "viewer" } }), 403);
  });
});
