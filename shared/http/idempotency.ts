/**
 * `Idempotency-Key` on the creating POSTs a script retries (defineRoute's
 * `idempotent: true`): POST /api/projects, POST /api/deployments, invitations and
 * notification channels. A retry with the same key gets the first answer again
 * instead of a second object.
 *
 * - Keyed per principal (the user who asked, whichever of their tokens or sessions
 *   sent it: another user's key never collides) and per route (method and template).
 * - The request is its path, its active organization and its body bytes (SHA-256):
 *   the same key with another request is 422, whatever the first answer was.
 * - The first request claims the key with one INSERT … ON CONFLICT (a row without a
 *   status); a request with that key while it runs is 409 (nothing runs twice). A
 *   claim older than IN_PROGRESS_TIMEOUT_MS is presumed lost (its process ended)
 *   and may be taken over.
 * - Kept answers (see KEPT): every 2xx and the 4xx a retry would get again (a
 *   validation 400, a 404). Not kept: 5xx, and 403, 408, 409, 429, which depend on
 *   a state or a moment that may pass; the key is released, a retry runs anew.
 * - The answer is replayed byte for byte with its status and Content-Type, marked
 *   `Idempotency-Replayed: true`. Its body is encrypted with the keyring (an answer
 *   may hold a secret shown once: an invitation code, a channel's signing secret).
 * - Keys live IDEMPOTENCY_TTL_MS from the first request; expired rows are swept in
 *   batches with the rate-limit windows (pruneIdempotencyKeys).
 */
import { sql } from "drizzle-orm";
import type { MiddlewareHandler } from "hono";
import { sha256Hex } from "../crypto/encoding";
import type { SecretContext } from "../crypto/keyring";
import { rowsOf } from "../db/rows";
import type { Executor } from "../db/types";
import type { AppEnv } from "./context";
import { describeError } from "./error-log";
import { ApiError, badRequest } from "./errors";

export const IDEMPOTENCY_HEADER = "Idempotency-Key";
export const REPLAYED_HEADER = "Idempotency-Replayed";
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
export const IN_PROGRESS_TIMEOUT_MS = 5 * 60 * 1000;
export const MAX_KEY_LENGTH = 255;

/** 1 to 255 visible ASCII characters (a UUID fits; no spaces, no control characters). */
const KEY_SYNTAX = /^[\x21-\x7e]{1,255}$/;

/** Whether an answer of this status is kept for replay (otherwise the key is released). */
export const KEPT = (status: number) => status < 500 && ![403, 408, 409, 429].includes(status);

/** The OpenAPI description of the header, shared by every idempotent route. */
export const IDEMPOTENCY_DESCRIPTION = [
  `Optional; 1 to ${MAX_KEY_LENGTH} visible ASCII characters (e.g. a UUID), else 400 naming \`${IDEMPOTENCY_HEADER}\`.`,
  "A retry with the same key and the same request (path, active organization and body bytes) within 24 hours of the first gets the first answer again: its status, body and Content-Type, with `Idempotency-Replayed: true`; nothing is created again.",
  "The same key with another request is 422; while the first request with the key is still running, 409 (retry shortly).",
  "Keys belong to the user who sent them (any of their tokens) and to this operation.",
  "Kept: 2xx answers and the 4xx a retry would get again (400, 404); a 5xx, 403, 408, 409 or 429 is not kept, so a retry with the key runs anew.",
].join(" ");

const secretContext = (principal: string, route: string, key: string): SecretContext => ({
  orgId: principal,
  table: "idempotency_keys",
  column: "body_ciphertext",
  rowId: `${route} ${key}`,
});

interface Stored {
  request_hash: string;
  status: number | null;
  content_type: string | null;
  body_ciphertext: string | null;
}

/** Claims the key for a new request (none yet, expired, or abandoned); false when a live row holds it. */
async function claim(db: Executor, id: { principal: string; route: string; key: string }, hash: string, now: Date): Promise<boolean> {
  const expired = new Date(now.getTime() - IDEMPOTENCY_TTL_MS).toISOString();
  const abandoned = new Date(now.getTime() - IN_PROGRESS_TIMEOUT_MS).toISOString();
  const result = await db.execute(sql`
    insert into idempotency_keys as k (principal, route, key, request_hash, created_at)
    values (${id.principal}, ${id.route}, ${id.key}, ${hash}, ${now.toISOString()}::timestamptz)
    on conflict (principal, route, key) do update set
      request_hash = excluded.request_hash, status = null, content_type = null, body_ciphertext = null, created_at = excluded.created_at
      where k.created_at <= ${expired}::timestamptz or (k.status is null and k.created_at <= ${abandoned}::timestamptz)
    returning 1 as claimed`);
  return rowsOf(result).length > 0;
}

async function stored(db: Executor, id: { principal: string; route: string; key: string }): Promise<Stored | undefined> {
  const result = await db.execute(sql`
    select request_hash, status, content_type, body_ciphertext from idempotency_keys
    where principal = ${id.principal} and route = ${id.route} and key = ${id.key}`);
  return rowsOf<Stored>(result)[0];
}

/** The middleware of an idempotent route: after the guard and the body check, before validation and the handler. */
export function idempotency(route: string): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const key = c.req.header(IDEMPOTENCY_HEADER);
    if (key === undefined) return next();
    if (!KEY_SYNTAX.test(key)) {
      throw badRequest(IDEMPOTENCY_HEADER, `${IDEMPOTENCY_HEADER} must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters (no spaces), e.g. a UUID`);
    }
    const caller = c.get("caller");
    if (!caller) throw new Error("idempotency used on a route without a user guard");
    const db = c.get("db");
    const keyring = c.get("keyring");
    const id = { principal: `user:${caller.userId}`, route, key };
    // The body was read under the route's size limit by jsonBody; this is its cached text.
    const body = await c.req.text();
    const hash = sha256Hex(JSON.stringify([c.req.path, caller.orgId, body]));
    const now = c.get("clock")();

    if (!(await claim(db, id, hash, now))) {
      const row = await stored(db, id);
      if (!row) throw inProgress(); // swept between the two statements: rare, and a retry claims it
      if (row.request_hash !== hash) {
        throw new ApiError(
          "unprocessable",
          `This ${IDEMPOTENCY_HEADER} was used with another request (path, organization or body) in the last 24 hours; use a new key for a new request`,
          { field: IDEMPOTENCY_HEADER },
        );
      }
      if (row.status === null || row.body_ciphertext === null) throw inProgress();
      const answer = await keyring.decrypt(row.body_ciphertext, secretContext(id.principal, route, key));
      return c.body(answer, row.status as 200, {
        ...(row.content_type ? { "content-type": row.content_type } : {}),
        [REPLAYED_HEADER]: "true",
      });
    }

    const owned = sql`principal = ${id.principal} and route = ${id.route} and key = ${id.key} and status is null and created_at = ${now.toISOString()}::timestamptz`;
    try {
      await next();
    } catch (e) {
      await db.execute(sql`delete from idempotency_keys where ${owned}`);
      throw e;
    }
    const res = c.res;
    try {
      if (KEPT(res.status)) {
        const ciphertext = await keyring.encrypt(await res.clone().text(), secretContext(id.principal, route, key));
        await db.execute(sql`
          update idempotency_keys set status = ${res.status}, content_type = ${res.headers.get("content-type")}, body_ciphertext = ${ciphertext}
          where ${owned}`);
      } else {
        await db.execute(sql`delete from idempotency_keys where ${owned}`);
      }
    } catch (e) {
      // The answer stands; a retry meets the in-progress claim until it times out.
      c.get("logger").error("idempotency key not recorded", { requestId: c.get("requestId"), route, ...describeError(e) });
    }
  };
}

const inProgress = () =>
  new ApiError(
    "conflict",
    `A request with this ${IDEMPOTENCY_HEADER} is still running; retry in a moment to get its answer`,
    { field: IDEMPOTENCY_HEADER },
    { "retry-after": "1" },
  );

/** Deletes keys older than the TTL, at most `limit` rows (called in batches by the sweeper). */
export async function pruneIdempotencyKeys(db: Executor, now: Date, limit = 5_000): Promise<number> {
  const expired = new Date(now.getTime() - IDEMPOTENCY_TTL_MS).toISOString();
  const result = await db.execute(sql`
    with gone as (
      delete from idempotency_keys where (principal, route, key) in (
        select principal, route, key from idempotency_keys where created_at <= ${expired}::timestamptz limit ${limit})
        -- re-checked on the row deleted: a key a concurrent request just claimed again stays
        and created_at <= ${expired}::timestamptz
      returning 1
    ) select count(*)::int as n from gone`);
  return rowsOf<{ n: number }>(result)[0]?.n ?? 0;
}
