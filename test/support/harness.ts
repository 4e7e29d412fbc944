/**
 * The runtime-agnostic test harness. A suite receives a `Harness` and never
 * knows whether requests reach the Node adapter (PGlite or Postgres) or the
 * Worker inside workerd. Every test seeds its own tenant.
 */
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { z } from "zod";
import type { Role } from "../../shared/auth/permissions";
import type { Keyring } from "../../shared/crypto/keyring";
import type { Db } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { addMember, createOrganization, createUser, issueToken } from "../../functions/identity/store";

export interface Harness {
  runtime: "node-pglite" | "node-postgres" | "worker";
  /** True when the database runs transactions concurrently (real Postgres). */
  realConcurrency: boolean;
  request(path: string, init?: RequestOptions): Promise<Response>;
  db: Db;
  keyring: Keyring;
  /** Every log line the app wrote so far. */
  logs: string[];
  close(): Promise<void>;
}

export interface RequestOptions {
  method?: string;
  token?: string;
  org?: string;
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
}

export function buildRequest(path: string, init: RequestOptions = {}): Request {
  const headers = new Headers(init.headers);
  if (init.token) headers.set("authorization", `Bearer ${init.token}`);
  if (init.org) headers.set("x-organization-id", init.org);
  let body = init.body;
  if (init.json !== undefined) {
    headers.set("content-type", "application/json");
    body = JSON.stringify(init.json);
  }
  // A streamed body (no Content-Length: sent chunked) needs half-duplex on Node.
  const duplex = body instanceof ReadableStream ? { duplex: "half" } : {};
  return new Request(`http://workspace.test${path}`, { method: init.method ?? (body ? "POST" : "GET"), headers, body, ...duplex } as RequestInit);
}

/** Thrown by the Postgres and Worker harness factories when the run has no Postgres. */
export class PostgresUnavailable extends Error {}

/** A harness factory; `realConcurrency` is known before the harness starts. */
export type HarnessFactory = (() => Promise<Harness>) & { realConcurrency: () => boolean };

/**
 * Registers beforeAll/afterAll and returns the harness, filled in once ready.
 * `h.realConcurrency` is set at once, so `it.runIf(h.realConcurrency)` works
 * while tests are being collected.
 */
export function useHarness(create: HarnessFactory): Harness {
  const h = { realConcurrency: create.realConcurrency() } as Harness;
  let unavailable = false;
  beforeAll(async () => {
    try {
      Object.assign(h, await create());
    } catch (e) {
      if (!(e instanceof PostgresUnavailable)) throw e;
      unavailable = true;
    }
  });
  // Without Postgres (never in CI) the Postgres and Worker runs are reported as skipped.
  beforeEach((ctx) => {
    if (unavailable) ctx.skip();
  });
  afterAll(async () => {
    await h.close?.();
  });
  return h;
}

export interface Member {
  userId: string;
  email: string;
  token: string;
  orgId: string;
}

/** A new organization whose owner holds an all-tags token. */
export async function seedTenant(h: Harness, opts: { scopes?: string[] } = {}): Promise<Member> {
  const email = `${newId("u")}@example.test`;
  const user = await createUser(h.db, { email, name: "Test Owner" });
  const org = await createOrganization(h.db, `org ${email}`, user.id);
  const { token } = await issueToken(h.db, { userId: user.id, name: "test", scopes: opts.scopes ?? null, expiresAt: null });
  return { userId: user.id, email, token, orgId: org.id };
}

/** Another user in an existing organization, with the given role. */
export async function seedMember(h: Harness, orgId: string, role: Role, opts: { scopes?: string[] } = {}): Promise<Member> {
  const email = `${newId("u")}@example.test`;
  const user = await createUser(h.db, { email, name: `Test ${role}` });
  await addMember(h.db, orgId, user.id, role);
  const { token } = await issueToken(h.db, { userId: user.id, name: "test", scopes: opts.scopes ?? null, expiresAt: null });
  return { userId: user.id, email, token, orgId };
}

/** Another token for an existing user. */
export async function seedToken(h: Harness, userId: string, opts: { scopes?: string[] | null; expiresAt?: Date | null } = {}) {
  const { token, row } = await issueToken(h.db, { userId, name: "extra", scopes: opts.scopes ?? null, expiresAt: opts.expiresAt ?? null });
  return { token, id: row.id };
}

/** Reads a JSON body and asserts the status first, with the body in the message. */
export async function expectStatus<T = any>(res: Response, status: number): Promise<T> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/**
 * Asserts the status, then checks the JSON body against the route's own response schema
 * (the one its OpenAPI document is built from) and returns it typed. A body that drifts
 * from the schema fails with every issue by path: a missing or mistyped field, and a field
 * the schema does not declare (a client generated from the document would not know it).
 */
export async function expectBody<S extends z.ZodType>(res: Response, status: number, schema: S): Promise<z.output<S>> {
  const body = await expectStatus<unknown>(res, status);
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new Error(`${res.status} body does not match its schema:\n${z.prettifyError(parsed.error)}\nbody: ${JSON.stringify(body)}`);
  const undeclared = undeclaredPaths(body, parsed.data);
  if (undeclared.length) throw new Error(`${res.status} body has fields its schema does not declare: ${undeclared.join(", ")}\nbody: ${JSON.stringify(body)}`);
  return body as z.output<S>;
}

/** Paths present in the raw body but stripped by the schema (objects are compared key by key, arrays item by item). */
function undeclaredPaths(raw: unknown, parsed: unknown, path = "", out: string[] = []): string[] {
  if (Array.isArray(raw) && Array.isArray(parsed)) {
    raw.forEach((item, i) => {
      undeclaredPaths(item, parsed[i], `${path}[${i}]`, out);
    });
  } else if (raw && parsed && typeof raw === "object" && typeof parsed === "object") {
    for (const key of Object.keys(raw)) {
      const at = path ? `${path}.${key}` : key;
      if (!(key in parsed)) out.push(at);
      else undeclaredPaths((raw as Record<string, unknown>)[key], (parsed as Record<string, unknown>)[key], at, out);
    }
  }
  return out;
}

/** Asserts a problem+json answer and returns the problem. */
export async function expectProblem(res: Response, status: number, field?: string) {
  const problem = await expectStatus<{ status: number; detail: string; field?: string; allowed?: unknown[]; requestId: string }>(res, status);
  if (!res.headers.get("content-type")?.startsWith("application/problem+json")) throw new Error(`not problem+json: ${res.headers.get("content-type")}`);
  if (problem.status !== status) throw new Error(`problem.status ${problem.status} != ${status}`);
  if (field !== undefined && problem.field !== field) throw new Error(`expected field '${field}', got '${problem.field}': ${problem.detail}`);
  return problem;
}

/** The public schema's tables. */
async function tableNames(db: Db): Promise<string[]> {
  const res = await db.execute(sql`select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`);
  return ((res as unknown as { rows?: { table_name: string }[] }).rows ?? (res as unknown as { table_name: string }[])).map((r) => r.table_name);
}

/**
 * Every row of every table as text, for proving a secret is not stored in the
 * clear. For a database shared by a whole test run (the shared suites on
 * Postgres and the Worker) use `storedIn`, which searches where the rows are
 * instead of transferring them all.
 */
export async function dumpAllTables(h: Pick<Harness, "db">): Promise<string> {
  let out = "";
  for (const table of await tableNames(h.db)) {
    const res = await h.db.execute(sql.raw(`select row_to_json(t)::text as j from "${table}" t`));
    const list = (res as unknown as { rows?: { j: string }[] }).rows ?? (res as unknown as { j: string }[]);
    for (const r of list) out += `${r.j}\n`;
  }
  return out;
}

/**
 * The tables holding a row whose JSON text contains `needle`, searched in the
 * database in one statement: `expect(await storedIn(h, secret)).toEqual([])`.
 */
export async function storedIn(h: Pick<Harness, "db">, needle: string): Promise<string[]> {
  const probes = (await tableNames(h.db)).map(
    (table) => sql`select ${table}::text as t where exists (select 1 from ${sql.raw(`"${table}"`)} x where strpos(row_to_json(x)::text, ${needle}::text) > 0)`,
  );
  const res = await h.db.execute(sql.join(probes, sql` union all `));
  return ((res as unknown as { rows?: { t: string }[] }).rows ?? (res as unknown as { t: string }[])).map((r) => r.t).sort();
}

/**
 * Retries an assertion for a short while: for changes made behind the API's back
 * (direct SQL), which reach cached state through database notifications.
 */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 3000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}
