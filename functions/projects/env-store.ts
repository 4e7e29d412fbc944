/**
 * Env var rows. A secret's value exists only as ciphertext bound to its row
 * (organization, table, column and `<project>/<environment>/<key>`), so it cannot be
 * moved to another key, environment or project. Reads never decrypt: secrets read
 * back as MASK.
 */
import { and, asc, eq, gt, inArray, sql } from "drizzle-orm";
import type { Keyring } from "../../shared/crypto/keyring";
import { envVars } from "../../shared/db/schema";
import type { Db, Executor, Tx } from "../../shared/db/types";
import { badRequest } from "../../shared/http/errors";
import { findEnvironment } from "./environments-store";
import { findProject } from "./store";

/** What a secret value reads as, whatever its length. Sent back as a value, it keeps the stored secret. */
export const MASK = "••••••••";

type Row = typeof envVars.$inferSelect;
interface Scope {
  orgId: string;
  projectId: string;
  environmentId: string;
}
interface Upsert {
  key: string;
  value: string;
  isSecret?: boolean;
}

/** The context a secret value is bound to (also used by the runner to decrypt it in memory). */
export const secretContext = (s: Scope, key: string) => ({
  orgId: s.orgId,
  table: "env_vars",
  column: "value",
  rowId: `${s.projectId}/${s.environmentId}/${key}`,
});

const inScope = (s: Scope) => and(eq(envVars.projectId, s.projectId), eq(envVars.environmentId, s.environmentId));

/** A variable with its value in the clear (secrets decrypted): only ever held in memory. */
export interface DecryptedVariable {
  key: string;
  value: string;
  isSecret: boolean;
}

/** Every variable of the environment, ordered by key, secrets decrypted in memory (what a deployment pins, config-snapshot.ts). */
export async function decryptedEnv(ex: Executor, keyring: Keyring, s: Scope): Promise<DecryptedVariable[]> {
  const rows = await ex.select().from(envVars).where(inScope(s)).orderBy(asc(envVars.key));
  const out: DecryptedVariable[] = [];
  for (const r of rows) {
    const value = r.isSecret ? await keyring.decrypt(r.valueCiphertext!, secretContext(s, r.key)) : r.value!;
    out.push({ key: r.key, value, isSecret: r.isSecret });
  }
  return out;
}

export const envView = (r: Pick<Row, "key" | "value" | "isSecret" | "updatedAt">) => ({
  key: r.key,
  value: r.isSecret ? MASK : r.value!,
  isSecret: r.isSecret,
  updatedAt: r.updatedAt.toISOString(),
});

/** The project's environment by name, else 400 naming `environment` (the field that named it). */
export async function environmentOf(ex: Executor, projectId: string, name: string, lock?: "no key update") {
  const env = await findEnvironment(ex, projectId, name, lock);
  if (!env) throw badRequest("environment", `The project has no environment named '${name}'`);
  return env;
}

export async function listEnv(ex: Executor, s: Scope, limit: number, cursor?: string) {
  return ex
    .select()
    .from(envVars)
    .where(and(inScope(s), cursor !== undefined ? gt(envVars.key, cursor) : undefined))
    .orderBy(asc(envVars.key))
    .limit(limit + 1);
}

/**
 * One merge into the named environment of the caller's project, in one transaction.
 * Secrets are sealed before it (presealSecrets): on the embedded database a
 * transaction has the one session to itself, so the CPU work is kept out of it.
 */
export async function mergeProjectEnv(
  db: Db,
  keyring: Keyring,
  orgId: string,
  projectId: string,
  environment: string,
  upserts: Upsert[],
  deletes: string[],
  now: Date,
) {
  const before = await findProject(db, orgId, projectId);
  const envBefore = await environmentOf(db, before.id, environment);
  const presealed = await presealSecrets(db, keyring, { orgId, projectId: before.id, environmentId: envBefore.id }, upserts);
  return db.transaction(async (tx) => {
    // KEY SHARE: a concurrent DELETE of the project waits for this merge (or this merge sees 404).
    const project = await findProject(tx, orgId, projectId, "key share");
    // Merges of one environment take turns (row locks alone cannot cover keys that do not exist yet).
    const env = await environmentOf(tx, project.id, environment, "no key update");
    const scope = { orgId, projectId: project.id, environmentId: env.id };
    return mergeEnv(tx, keyring, scope, upserts, deletes, now, env.id === envBefore.id ? presealed : new Map());
  });
}

/** A ciphertext sealed before the merge's transaction, and the stored ciphertext (null: none, or plain) it was decided against. */
interface Presealed {
  against: string | null;
  ciphertext: string;
}

/** The stored rows of `keys`, a few at a time (a stored value may be as long as the 32 KiB cap, a ciphertext longer). */
async function storedRows(ex: Executor, s: Scope, keys: string[]): Promise<Map<string, Row>> {
  const existing = new Map<string, Row>();
  for (const [n, batch] of batches(keys, () => 32 * 1024).entries()) {
    if (n > 0) await yieldToOthers();
    const rows = await ex
      .select()
      .from(envVars)
      .where(and(inScope(s), inArray(envVars.key, batch)));
    for (const row of rows) existing.set(row.key, row);
  }
  return existing;
}

/**
 * Seals the secret values of a merge from the rows as they are now, outside its
 * transaction, giving way every few values. The merge uses a ciphertext only when the
 * stored row it was decided against is still the one it finds under its lock (else it
 * seals that value again), so a merge in between loses nothing.
 */
async function presealSecrets(ex: Executor, keyring: Keyring, s: Scope, upserts: Upsert[]): Promise<Map<string, Presealed>> {
  const out = new Map<string, Presealed>();
  const existing = await storedRows(
    ex,
    s,
    upserts.filter((u) => u.value !== MASK).map((u) => u.key),
  );
  let sealed = 0;
  for (const u of upserts) {
    if (u.value === MASK) continue;
    const prev = existing.get(u.key);
    if (!(u.isSecret ?? prev?.isSecret ?? false)) continue;
    sealed += u.value.length;
    if (sealed >= STATEMENT_CHARS) {
      sealed = 0;
      await yieldToOthers();
    }
    out.set(u.key, { against: prev?.isSecret ? prev.valueCiphertext : null, ciphertext: await sealSecret(keyring, s, u.key, u.value, prev) });
  }
  return out;
}

/**
 * A secret's ciphertext: the stored one when the value did not change (a form saved
 * again), so what deployments compare (config-drift.ts) sees no change; else a new one.
 */
async function sealSecret(keyring: Keyring, s: Scope, key: string, value: string, prev: Row | undefined): Promise<string> {
  const ctx = secretContext(s, key);
  if (prev?.isSecret && prev.valueCiphertext) {
    const stored = await keyring.decrypt(prev.valueCiphertext, ctx).catch(() => undefined);
    if (stored === value) return prev.valueCiphertext;
  }
  return keyring.encrypt(value, ctx);
}

/** Gives way to other work between batches of a large merge (a macrotask: promise continuations alone would not). */
export const yieldToOthers = (): Promise<void> =>
  new Promise((resolve) => (typeof setImmediate === "function" ? setImmediate(resolve) : setTimeout(resolve, 0)));

/**
 * Values (characters) one statement of a merge carries at most: a merge of 200 values
 * near their 32 KiB cap is ~50 short statements rather than one of 6.5 MB, and the
 * event loop (which runs the embedded database's statements, and parses every result)
 * is given way between them.
 */
const STATEMENT_CHARS = 128 * 1024;
/** Rows per statement at most, however short their values. */
const STATEMENT_ROWS = 100;

/** `items` in consecutive batches of at most STATEMENT_ROWS items and STATEMENT_CHARS characters (`size` of each; at least one item a batch). */
function batches<T>(items: T[], size: (item: T) => number): T[][] {
  const out: T[][] = [];
  let batch: T[] = [];
  let chars = 0;
  for (const item of items) {
    const n = size(item);
    if (batch.length > 0 && (batch.length >= STATEMENT_ROWS || chars + n > STATEMENT_CHARS)) {
      out.push(batch);
      batch = [];
      chars = 0;
    }
    batch.push(item);
    chars += n;
  }
  if (batch.length > 0) out.push(batch);
  return out;
}

/**
 * Applies one merge inside the caller's transaction, which must hold the
 * environment's row lock: merges of one environment then run one at a time, so
 * what is read here stays true until commit and overlapping merges cannot deadlock.
 * Large merges read, seal and write in batches (STATEMENT_CHARS), giving way to other
 * work between them, in the same transaction.
 */
async function mergeEnv(tx: Tx, keyring: Keyring, s: Scope, upserts: Upsert[], deletes: string[], now: Date, presealed: Map<string, Presealed>) {
  const existing = await storedRows(
    tx,
    s,
    upserts.map((u) => u.key),
  );

  const rows: Array<typeof envVars.$inferInsert> = [];
  /** The response's view of each upserted key: what is written, or the stored secret a masked value keeps. */
  const views = new Map<string, ReturnType<typeof envView>>();
  let sealed = 0;
  /** The presealed ciphertext when it was decided against the row found now, else sealed here. */
  const seal = async (u: Upsert, prev: Row | undefined) => {
    const pre = presealed.get(u.key);
    if (pre && pre.against === (prev?.isSecret ? prev.valueCiphertext : null)) return pre.ciphertext;
    sealed += u.value.length;
    if (sealed >= STATEMENT_CHARS) {
      sealed = 0;
      await yieldToOthers();
    }
    return sealSecret(keyring, s, u.key, u.value, prev);
  };
  for (const [i, u] of upserts.entries()) {
    const prev = existing.get(u.key);
    // Omitted isSecret keeps the variable's kind; a new variable is plain.
    const isSecret = u.isSecret ?? prev?.isSecret ?? false;
    if (u.value === MASK) {
      if (prev?.isSecret && isSecret) {
        views.set(u.key, envView(prev));
        continue; // the GET output sent back: keep the stored secret
      }
      throw badRequest(
        `upserts.${i}.value`,
        prev?.isSecret
          ? "The masked placeholder cannot turn a secret into a plain variable; send the new value in the clear"
          : "The masked placeholder stands for a stored secret and cannot be stored as a value",
      );
    }
    rows.push({
      ...s,
      key: u.key,
      isSecret,
      value: isSecret ? null : u.value,
      valueCiphertext: isSecret ? await seal(u, prev) : null,
      updatedAt: now,
    });
    views.set(u.key, envView({ key: u.key, value: isSecret ? null : u.value, isSecret, updatedAt: now }));
  }
  for (const [n, batch] of batches(rows, (r) => (r.value ?? r.valueCiphertext ?? "").length + r.key.length).entries()) {
    if (n > 0) await yieldToOthers();
    await tx
      .insert(envVars)
      .values(batch)
      .onConflictDoUpdate({
        target: [envVars.projectId, envVars.environmentId, envVars.key],
        set: {
          value: sql`excluded.value`,
          valueCiphertext: sql`excluded.value_ciphertext`,
          isSecret: sql`excluded.is_secret`,
          updatedAt: sql`excluded.updated_at`,
        },
      });
  }
  const deleted = deletes.length
    ? await tx
        .delete(envVars)
        .where(and(inScope(s), inArray(envVars.key, deletes)))
        .returning({ key: envVars.key })
    : [];
  // The upserted keys in the database's order (its collation orders keys, as every read of the list does); their values are known.
  const order = upserts.length
    ? await tx
        .select({ key: envVars.key })
        .from(envVars)
        .where(
          and(
            inScope(s),
            inArray(
              envVars.key,
              upserts.map((u) => u.key),
            ),
          ),
        )
        .orderBy(asc(envVars.key))
    : [];
  return { upserted: order.map((r) => views.get(r.key)!), deleted: deleted.map((d) => d.key).sort() };
}
