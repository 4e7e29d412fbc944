/**
 * The main thread's side of the embedded database: PGlite runs in a worker thread
 * (pglite-worker.mjs) and this client sends it each statement as a message, so a
 * slow statement never blocks the server's event loop (see pglite.ts for why).
 *
 * It has the part of PGlite's API that drizzle (`drizzle-orm/pglite`) and this
 * code use, with PGlite's behaviour:
 * - query / exec: rows parsed by PGlite in the worker; the type ids the caller
 *   gives parsers for come raw and its parsers run here (drizzle's raw dates);
 * - transaction: BEGIN in the worker holds PGlite's lock until the callback
 *   settles (COMMIT, or ROLLBACK and the error rethrown); every other statement
 *   waits for it, as on PGlite itself;
 * - listen: notifications forwarded, in the order PGlite delivers them (before
 *   the answer to the statement that brought them);
 * - errors: Postgres errors come back as PGlite's DatabaseError with their fields
 *   (`code`, `detail`, `constraint`, `table`, `query`, ...);
 * - dumpDataDir, close (PGlite closes cleanly, then the worker ends).
 */
import { Worker } from "node:worker_threads";
import { messages, type QueryOptions, type Results, type Transaction } from "@electric-sql/pglite";

/** The worker's file: `../../` from both shared/db/ and the bundle's dist/node/ is the repository root. */
const WORKER_URL = new URL("../../shared/db/pglite-worker.mjs", import.meta.url);

interface ErrorData {
  message: string;
  name: string;
  database: boolean;
  fields: Record<string, unknown>;
}

type Answer = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: ErrorData };
type Notification = { op: "notify"; channel: string; payload: string };

function toError(data: ErrorData): Error {
  const e: Error = data.database ? new messages.DatabaseError(data.message, 0, data.name as messages.MessageName) : new Error(data.message);
  Object.assign(e, data.fields);
  if (!data.database) e.name = data.name;
  return e;
}

/** Runs the caller's parsers on the columns whose types came raw (PGlite's rule: not on nulls; by name the last column wins). */
function applyParsers(result: Results, parsers: NonNullable<QueryOptions["parsers"]>, rowMode: QueryOptions["rowMode"]): void {
  const columns = new Map<string | number, { typeId: number; parse: (value: string, typeId: number) => unknown } | undefined>();
  result.fields.forEach((f, i) => {
    const parse = parsers[f.dataTypeID];
    columns.set(rowMode === "array" ? i : f.name, parse ? { typeId: f.dataTypeID, parse } : undefined);
  });
  for (const [key, column] of columns) {
    if (!column) continue;
    for (const row of result.rows as Record<string | number, unknown>[]) {
      const value = row[key];
      if (value !== null && value !== undefined) row[key] = column.parse(value as string, column.typeId);
    }
  }
}

export class PgliteWorkerClient {
  readonly waitReady: Promise<void>;
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(e: Error): void }>();
  readonly #listeners = new Map<string, Set<(payload: string) => void>>();
  #next = 1;
  #nextTransaction = 1;
  #failure: Error | undefined;
  #closing: Promise<void> | undefined;

  constructor(worker: Worker) {
    this.#worker = worker;
    worker.on("message", (msg: Answer | Notification) => this.#receive(msg));
    worker.on("error", (e) => this.#fail(e));
    this.#exited = new Promise((resolve) =>
      worker.once("exit", (code) => {
        this.#fail(new Error(`The embedded database's worker exited (code ${code})`));
        resolve();
      }),
    );
    this.waitReady = this.#call<void>({ op: "ready" });
  }

  get closed(): boolean {
    return this.#closing !== undefined || this.#failure !== undefined;
  }

  get ready(): boolean {
    return !this.closed;
  }

  query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>> {
    return this.#query<T>(undefined, sql, params, options);
  }

  exec(sql: string, options?: QueryOptions): Promise<Results[]> {
    return this.#exec(undefined, sql, options);
  }

  async transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T> {
    const tx = this.#nextTransaction++;
    await this.#call({ op: "begin", tx });
    let closed = false;
    const check = () => {
      if (closed) throw new Error("Transaction is closed");
    };
    const handle = {
      query: async <R>(sql: string, params?: unknown[], options?: QueryOptions) => {
        check();
        return await this.#query<R>(tx, sql, params, options);
      },
      exec: async (sql: string, options?: QueryOptions) => {
        check();
        return await this.#exec(tx, sql, options);
      },
      rollback: async () => {
        check();
        await this.#call({ op: "rollback", tx });
        closed = true;
      },
      get closed() {
        return closed;
      },
    };
    let result: T;
    try {
      result = await callback(handle as unknown as Transaction);
    } catch (e) {
      closed = true;
      await this.#call({ op: "end", tx, commit: false }).catch(() => {});
      throw e;
    }
    closed = true;
    await this.#call({ op: "end", tx, commit: true });
    return result;
  }

  async listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>> {
    let callbacks = this.#listeners.get(channel);
    if (!callbacks) {
      callbacks = new Set();
      this.#listeners.set(channel, callbacks);
    }
    const first = callbacks.size === 0;
    callbacks.add(callback);
    if (first) {
      try {
        await this.#call({ op: "listen", channel });
      } catch (e) {
        callbacks.delete(callback);
        throw e;
      }
    }
    const set = callbacks;
    return async () => {
      if (!set.delete(callback) || set.size > 0 || this.#listeners.get(channel) !== set) return;
      this.#listeners.delete(channel);
      if (!this.closed) await this.#call({ op: "unlisten", channel });
    };
  }

  async dumpDataDir(compression?: "auto" | "gzip" | "none"): Promise<Blob> {
    const { buffer, type } = await this.#call<{ buffer: ArrayBuffer; type: string }>({ op: "dump", compression });
    return new Blob([buffer], { type });
  }

  /** Closes PGlite (its files flushed) and ends the worker; a second call waits for the first. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        // Answered once PGlite closed (its files written): the worker has nothing left to do.
        await this.#call({ op: "close" });
      } finally {
        await this.#worker.terminate();
        await this.#exited;
      }
    })();
    return this.#closing;
  }

  async #query<T>(tx: number | undefined, sql: string, params: unknown[] | undefined, options: QueryOptions | undefined): Promise<Results<T>> {
    const { rowMode, parsers, ...rest } = options ?? {};
    if (Object.keys(rest).length > 0)
      throw new Error(`query options ${Object.keys(rest).join(", ")} are not supported by the embedded database's worker client`);
    const raw = parsers ? Object.keys(parsers).map(Number) : undefined;
    const result = await this.#call<Results<T>>({ op: "query", tx, sql, params, rowMode, raw });
    if (parsers && raw && raw.length > 0) applyParsers(result as Results, parsers, rowMode);
    return result;
  }

  async #exec(tx: number | undefined, sql: string, options: QueryOptions | undefined): Promise<Results[]> {
    if (options && Object.keys(options).length > 0) throw new Error("exec options are not supported by the embedded database's worker client");
    return await this.#call<Results[]>({ op: "exec", tx, sql });
  }

  #call<T>(msg: Record<string, unknown>): Promise<T> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.#worker.postMessage({ ...msg, id });
    });
  }

  #receive(msg: Answer | Notification): void {
    if ("op" in msg) {
      for (const callback of this.#listeners.get(msg.channel) ?? []) {
        try {
          callback(msg.payload);
        } catch (e) {
          console.error(`LISTEN ${msg.channel} handler failed:`, e);
        }
      }
      return;
    }
    const pending = this.#pending.get(msg.id);
    if (!pending) return;
    this.#pending.delete(msg.id);
    if (msg.ok) pending.resolve(msg.value);
    else pending.reject(toError(msg.error));
  }

  #fail(e: Error): void {
    this.#failure ??= e;
    for (const pending of this.#pending.values()) pending.reject(e);
    this.#pending.clear();
  }
}

/** Starts the worker and opens PGlite in it (`loadDataDir`: a dump to start from, as PGlite's option). */
export async function openPgliteWorker(opts: { dataDir?: string; loadDataDir?: Blob | File }): Promise<PgliteWorkerClient> {
  const buffer = opts.loadDataDir ? await opts.loadDataDir.arrayBuffer() : undefined;
  const worker = new Worker(WORKER_URL, {
    workerData: { dataDir: opts.dataDir, load: buffer ? { buffer, type: opts.loadDataDir!.type } : undefined },
    transferList: buffer ? [buffer] : [],
    // The worker is plain JavaScript: no loader (tsx, vitest) of the parent's is needed there.
    execArgv: [],
  });
  const client = new PgliteWorkerClient(worker);
  try {
    await client.waitReady;
  } catch (e) {
    await worker.terminate();
    throw e;
  }
  return client;
}
