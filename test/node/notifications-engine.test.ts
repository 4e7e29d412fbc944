/**
 * The delivery engine on Node, on a database of its own (engines drain every
 * organization's sends, so they must not share the suites' database):
 * - a restart while sends are pending delivers each exactly once;
 * - a claim abandoned by a crashed engine is delivered once its lease ends;
 * - several engines draining at once never send the same row twice, and one engine keeps its
 *   `lanes` batches in flight at once;
 * - recipient resolution issues the same number of queries for 3 or 40 members;
 * - sends over a channel's or an organization's delivery limit are deferred to
 *   the window's end (no attempt spent) and then delivered exactly once, and
 *   engines racing on one channel send exactly its limit per window.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKeyring, type Keyring } from "../../shared/crypto/keyring";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import * as schema from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { silentLogger } from "../../shared/http/logger";
import { createNodeOutbound } from "../../shared/outbound/node";
import { createOrganization, createUser, addMember } from "../../functions/identity/store";
import { createDeliveryEngine, type DeliveryEngine } from "../../functions/notifications/delivery/engine";
import { emitNotificationEvent } from "../../functions/notifications/fanout";
import { createChannel, putSubscription, updateChannel } from "../../functions/notifications/store";
import { newId } from "../../shared/ids";
import { startHttpReceiver, type HttpReceiver } from "../support/receivers";
import { freshDatabase, type FreshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const real = inject("pgKind") === "postgres";
const transports = { outbound: createNodeOutbound({ allowPrivate: true, timeoutMs: 5_000 }) };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let own: FreshDatabase | undefined;
let dbUrl = "";
let pglite: PgliteDatabase | undefined;
let keyring: Keyring;
const opened: Array<{ close(): Promise<void> }> = [];
const receivers: HttpReceiver[] = [];

/** A connection to this file's database (a new pool each time: a "new process"). */
async function connect(): Promise<Db> {
  if (pglite) return pglite.db;
  const database: PostgresDatabase = await openPostgres(dbUrl, { migrate: false, max: 10 });
  opened.push(database);
  return database.db;
}

beforeAll(async () => {
  keyring = await createKeyring(TEST_SECRET_KEYS);
  if (real) {
    own = await freshDatabase(inject("pgUrl"), "ws_notify_engine", { migrate: true });
    dbUrl = own.url;
  } else {
    pglite = await openPglite({ loadDataDir: new Blob([readFileSync(inject("pgliteDump"))]), migrate: false });
  }
});

afterAll(async () => {
  for (const r of receivers) await r.close();
  for (const o of opened) await o.close();
  await pglite?.close();
  await own?.drop();
});

async function receiver(...args: Parameters<typeof startHttpReceiver>) {
  const r = await startHttpReceiver(...args);
  receivers.push(r);
  return r;
}

/** An organization with `members` users, each with a verified webhook channel to `url` subscribed to deploy.failed. */
async function seedOrg(db: Db, url: string, members = 1) {
  const owner = await createUser(db, { email: `${newId("u")}@example.test`, name: "owner" });
  const org = await createOrganization(db, "engine test", owner.id);
  const users = [owner.id];
  for (let i = 1; i < members; i++) {
    const u = await createUser(db, { email: `${newId("u")}@example.test`, name: `m${i}` });
    await addMember(db, org.id, u.id, "member");
    users.push(u.id);
  }
  for (const userId of users) {
    const o = { orgId: org.id, userId };
    const { row } = await createChannel(db, keyring, o, { kind: "webhook", label: "hook", config: { url } }, new Date());
    await updateChannel(db, keyring, o, row.id, { verified: true }, new Date());
    await putSubscription(db, o, { category: "deploy.failed", channelId: row.id, enabled: true }, new Date());
  }
  return { orgId: org.id, users };
}

async function rowsOfSql<T>(db: Db, query: string): Promise<T[]> {
  return (((await db.execute(query as never)) as unknown as { rows: T[] }).rows ?? []) as T[];
}

async function statusCounts(db: Db, orgId: string): Promise<Record<string, number>> {
  const res = await db.execute(`select status, count(*)::int as n from notification_outbox where org_id = '${orgId}' group by status` as never);
  const rows = (res as unknown as { rows: { status: string; n: number }[] }).rows;
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

async function until(check: () => Promise<boolean> | boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(20);
  }
}

function engine(db: Db, policy: Parameters<typeof createDeliveryEngine>[0]["policy"] = {}): DeliveryEngine {
  return createDeliveryEngine({ db, keyring, transports, logger: silentLogger, policy: { baseDelayMs: 50, ...policy } });
}

describe("delivery engine on Node", () => {
  it("a restart while deliveries are pending still delivers each exactly once", async () => {
    const db = await connect();
    const r = await receiver([], { status: 200, delayMs: 40 });
    const { orgId } = await seedOrg(db, `${r.origin}/hook`);
    const total = 24;
    for (let i = 0; i < total; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });

    // The first engine stops mid-way; sends in flight finish and are recorded.
    const first = engine(db, { batchSize: 2, concurrency: 2 });
    first.start({ pollMs: 20 });
    await until(() => r.recorder.hits.length >= 6);
    await first.stop();
    const afterStop = r.recorder.hits.length;
    const mid = await statusCounts(db, orgId);
    expect(mid.delivered).toBe(afterStop);
    expect(mid.sending ?? 0).toBe(0);
    expect(mid.pending).toBe(total - afterStop);
    await sleep(100);
    expect(r.recorder.hits.length).toBe(afterStop); // stopped means stopped

    // A new engine on a new connection to the same database finishes the rest.
    const second = engine(await connect(), { batchSize: 4, concurrency: 4 });
    second.start({ pollMs: 20 });
    await until(async () => (await statusCounts(db, orgId)).delivered === total);
    await second.stop();

    const counts = r.recorder.countsById();
    expect(counts.size).toBe(total);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });

  it("keeps `lanes` batches in flight at once, each send still delivered exactly once", async () => {
    const db = await connect();
    // A receiver that holds each request 150 ms and notes how many it holds at once.
    let open = 0;
    let most = 0;
    const ids: string[] = [];
    const server = createServer((req, res) => {
      open++;
      most = Math.max(most, open);
      ids.push(String(req.headers["webhook-id"]));
      req.resume();
      setTimeout(() => {
        open--;
        res.end("ok");
      }, 150);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    opened.push({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    const { orgId } = await seedOrg(db, `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`);
    for (let i = 0; i < 9; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });

    // One send per batch and per batch one at a time: only the lanes can overlap them.
    const e = engine(db, { batchSize: 1, concurrency: 1, lanes: 3 });
    await e.drain({ budgetMs: 20_000 });
    expect(await statusCounts(db, orgId)).toEqual({ delivered: 9 });
    expect(most).toBe(3);
    expect(new Set(ids).size).toBe(9);
    expect(ids).toHaveLength(9);
  });

  it("a send claimed by an engine that died is delivered once its lease ends", async () => {
    const db = await connect();
    const r = await receiver();
    const { orgId } = await seedOrg(db, `${r.origin}/hook`);
    for (let i = 0; i < 3; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });

    const crashed = engine(db, { leaseMs: 400 });
    const claimed = await crashed.claim(10);
    expect(claimed.length).toBeGreaterThanOrEqual(3); // the process dies here, before sending

    const survivor = engine(await connect());
    await survivor.drain();
    expect(r.recorder.hits).toHaveLength(0); // still leased
    await sleep(450);
    await survivor.drain();
    expect((await statusCounts(db, orgId)).delivered).toBe(3);
    const counts = r.recorder.countsById();
    expect(counts.size).toBe(3);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    // The abandoned claim counted as an attempt; the attempt log shows the one that was made.
    const res = await db.execute(`select attempts from notification_outbox where org_id = '${orgId}'` as never);
    expect((res as unknown as { rows: { attempts: number }[] }).rows.map((x) => x.attempts)).toEqual([2, 2, 2]);
  });

  it.runIf(real)("several engines draining at once never send a row twice (FOR UPDATE SKIP LOCKED)", async () => {
    const db = await connect();
    const r = await receiver([], { status: 200, delayMs: 5 });
    const { orgId } = await seedOrg(db, `${r.origin}/hook`, 8);
    for (let i = 0; i < 10; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });
    const engines = await Promise.all([1, 2, 3, 4].map(async () => engine(await connect(), { batchSize: 5, concurrency: 5 })));
    await Promise.all(engines.map((e) => e.drain()));
    expect((await statusCounts(db, orgId)).delivered).toBe(80);
    const counts = r.recorder.countsById();
    expect(counts.size).toBe(80);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });

  it("defers sends over a channel's limit to the window's end without spending attempts, then delivers each exactly once", async () => {
    const db = await connect();
    const r = await receiver();
    const { orgId } = await seedOrg(db, `${r.origin}/hook`);
    for (let i = 0; i < 8; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });
    const limited = engine(db, { limits: { perChannel: { max: 3, windowMs: 1_000 } } });

    const before = Date.now();
    await limited.drain();
    expect(r.recorder.hits).toHaveLength(3);
    expect(await statusCounts(db, orgId)).toEqual({ delivered: 3, pending: 5 });
    const waiting = await rowsOfSql<{ attempts: number; due_at: string; last_error: string; tries: number }>(
      db,
      `select o.attempts, o.due_at, o.last_error, (select count(*)::int from notification_attempts a where a.outbox_id = o.id) as tries
       from notification_outbox o where o.org_id = '${orgId}' and o.status = 'pending'`,
    );
    for (const w of waiting) {
      expect(w).toMatchObject({ attempts: 0, tries: 0, last_error: "Deferred: the channel's delivery limit (3 per 1 s) was reached" });
      expect(new Date(w.due_at).getTime()).toBeGreaterThan(before);
      expect(new Date(w.due_at).getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
    }
    await limited.drain();
    expect(r.recorder.hits).toHaveLength(3); // not before the window ends

    await until(async () => {
      await limited.drain();
      return r.recorder.hits.length >= 6;
    });
    expect(r.recorder.hits).toHaveLength(6);
    await until(async () => {
      await limited.drain();
      return (await statusCounts(db, orgId)).delivered === 8;
    });
    const counts = r.recorder.countsById();
    expect(counts.size).toBe(8);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    // Each send spent exactly one attempt, the one that delivered it.
    const spent = await rowsOfSql<{ attempts: number; tries: number }>(
      db,
      `select o.attempts, (select count(*)::int from notification_attempts a where a.outbox_id = o.id) as tries from notification_outbox o where o.org_id = '${orgId}'`,
    );
    expect(spent.every((x) => x.attempts === 1 && x.tries === 1)).toBe(true);
    // No more than the limit arrived within any one window.
    const at = r.recorder.hits.map((x) => x.at).sort((a, b) => a - b);
    for (let i = 3; i < at.length; i++) expect(at[i]! - at[i - 3]!).toBeGreaterThanOrEqual(500);
  });

  it("an organization's ceiling defers the excess across its channels and gives the unused channel units back", async () => {
    const db = await connect();
    const r = await receiver();
    const { orgId } = await seedOrg(db, `${r.origin}/hook`, 3);
    for (let i = 0; i < 2; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });
    const limited = engine(db, { limits: { perOrgOther: { max: 4, windowMs: 1_000 } } });
    await limited.drain();
    expect(await statusCounts(db, orgId)).toEqual({ delivered: 4, pending: 2 });
    const [pending] = await rowsOfSql<{ last_error: string }>(
      db,
      `select last_error from notification_outbox where org_id = '${orgId}' and status = 'pending' limit 1`,
    );
    expect(pending!.last_error).toBe("Deferred: the organization's delivery limit (4 per 1 s) was reached");
    // The channels were charged only for what was sent.
    const [charged] = await rowsOfSql<{ n: number }>(
      db,
      `select coalesce(sum(count), 0)::int as n from rate_limits where key in (select 'send:channel:' || id from notification_channels where org_id = '${orgId}')`,
    );
    expect(charged!.n).toBe(4);
    await until(async () => {
      await limited.drain();
      return (await statusCounts(db, orgId)).delivered === 6;
    });
    expect([...r.recorder.countsById().values()]).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it.runIf(real)("engines racing on one channel send exactly its limit per window", async () => {
    const db = await connect();
    const r = await receiver([], { status: 200, delayMs: 5 });
    const { orgId } = await seedOrg(db, `${r.origin}/hook`);
    for (let i = 0; i < 20; i++) await emitNotificationEvent(db, { orgId, category: "deploy.failed", title: `event ${i}` });
    const limits = { perChannel: { max: 5, windowMs: 1_500 } };
    const engines = await Promise.all([1, 2, 3, 4].map(async () => engine(await connect(), { batchSize: 3, concurrency: 3, limits })));
    await Promise.all(engines.map((e) => e.drain()));
    expect(r.recorder.hits).toHaveLength(5);
    expect(await statusCounts(db, orgId)).toEqual({ delivered: 5, pending: 15 });
    // Later windows deliver the rest, each once.
    await until(async () => {
      await Promise.all(engines.map((e) => e.drain()));
      return (await statusCounts(db, orgId)).delivered === 20;
    }, 30_000);
    const counts = r.recorder.countsById();
    expect(counts.size).toBe(20);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });

  it("resolves recipients with the same number of queries for 3 or 40 members", async () => {
    const base = await connect();
    const r = await receiver();
    const small = await seedOrg(base, `${r.origin}/hook`, 3);
    const large = await seedOrg(base, `${r.origin}/hook`, 40);
    let queries = 0;
    const logger = { logQuery: () => void queries++ };
    const counted: Db = pglite
      ? (drizzlePglite(pglite.client, { schema, logger }) as unknown as Db)
      : (drizzlePg((opened.at(-1) as PostgresDatabase).pool, { schema, logger }) as unknown as Db);

    const measure = async (orgId: string) => {
      queries = 0;
      const result = await emitNotificationEvent(counted, { orgId, category: "deploy.failed", title: "count me" });
      return { queries, result };
    };
    const a = await measure(small.orgId);
    const b = await measure(large.orgId);
    expect(a.result).toMatchObject({ recipients: 3, sends: 3 });
    expect(b.result).toMatchObject({ recipients: 40, sends: 40 });
    expect(b.queries).toBe(a.queries);
    // begin, the event row, the feed entries, the outbox rows, commit
    expect(a.queries).toBeLessThanOrEqual(5);
    // Leave nothing pending for the other tests of this file.
    await engine(base).drain();
  });
});
