/**
 * The worker thread that holds the embedded database (see pglite.ts, which starts
 * it and speaks to it). Plain JavaScript so Node runs it as it is, from the
 * sources and beside the bundle alike.
 *
 * Messages in: `{ id, op, ... }`; every one is answered `{ id, ok: true, value }`
 * or `{ id, ok: false, error }` (the error's own fields copied, `code` included).
 * Notifications go out as `{ op: "notify", channel, payload }`, posted as PGlite
 * delivers them: before the answer to the statement that brought them.
 *
 * Ops: query and exec (in a transaction when `tx` is set), begin (holds a
 * `PGlite.transaction` open until end: PGlite's own lock keeps every other
 * statement waiting meanwhile), end (commit or rollback), rollback, listen,
 * unlisten, dump, close.
 */
import { parentPort, workerData } from "node:worker_threads";
import { messages, PGlite } from "@electric-sql/pglite";

const port = parentPort;
if (!port) throw new Error("pglite-worker.mjs runs as a worker thread");

/** Open transactions by id: their PGlite session and how to end them. */
const transactions = new Map();
/** Each begun transaction's `PGlite.transaction` promise, settled once it committed or rolled back. */
const ends = new Map();
/** Unlisten functions by channel. */
const listening = new Map();
const ROLLBACK = Symbol("rollback");

/** Values are passed through as text for these type ids; the caller's parser runs on its side. */
const rawParsers = (ids) => (ids?.length ? Object.fromEntries(ids.map((id) => [id, (value) => value])) : undefined);

/** An error as plain data: message, name and its own fields (code, detail, constraint, ...). */
function errorData(e) {
  if (!(e instanceof Error)) return { message: String(e), name: "Error", database: false, fields: {} };
  const fields = {};
  for (const [k, v] of Object.entries(e)) {
    if (v === undefined || typeof v === "function" || k === "queryOptions") continue;
    fields[k] = typeof v === "object" && v !== null && k !== "params" ? String(v) : v;
  }
  return { message: e.message, name: e.name, database: e instanceof messages.DatabaseError, fields };
}

async function open() {
  const { dataDir, load } = workerData;
  const loadDataDir = load ? new Blob([load.buffer], { type: load.type }) : undefined;
  const db = new PGlite({ dataDir, loadDataDir });
  await db.waitReady;
  return db;
}

/** The session a statement runs on: the open transaction's, or the database's own. */
function target(db, tx) {
  if (tx === undefined) return db;
  const open = transactions.get(tx);
  if (!open) throw new Error("Transaction is closed");
  return open.tx;
}

async function handle(db, msg) {
  switch (msg.op) {
    case "ready":
      return { value: null };
    case "query": {
      const result = await target(db, msg.tx).query(msg.sql, msg.params, { rowMode: msg.rowMode, parsers: rawParsers(msg.raw) });
      return { value: result };
    }
    case "exec":
      return { value: await target(db, msg.tx).exec(msg.sql) };
    case "begin": {
      // Answered once BEGIN ran; the transaction stays open (PGlite's lock held) until "end".
      let started;
      const ready = new Promise((resolve) => {
        started = resolve;
      });
      let end;
      const ended = new Promise((resolve) => {
        end = resolve;
      });
      const done = db
        .transaction(async (tx) => {
          transactions.set(msg.tx, { tx, end });
          started();
          const commit = await ended;
          if (!commit && !tx.closed) throw ROLLBACK;
        })
        .catch((e) => {
          if (e !== ROLLBACK) throw e;
        })
        .finally(() => transactions.delete(msg.tx));
      ends.set(msg.tx, done);
      try {
        await Promise.race([ready, done]);
      } catch (e) {
        ends.delete(msg.tx);
        throw e;
      }
      return { value: null };
    }
    case "end": {
      const done = ends.get(msg.tx);
      ends.delete(msg.tx);
      if (!done) throw new Error("Transaction is closed");
      transactions.get(msg.tx)?.end(msg.commit);
      await done;
      return { value: null };
    }
    case "rollback":
      await target(db, msg.tx).rollback();
      return { value: null };
    case "listen": {
      if (!listening.has(msg.channel)) {
        const unlisten = await db.listen(msg.channel, (payload) => port.postMessage({ op: "notify", channel: msg.channel, payload }));
        listening.set(msg.channel, unlisten);
      }
      return { value: null };
    }
    case "unlisten": {
      const unlisten = listening.get(msg.channel);
      listening.delete(msg.channel);
      await unlisten?.();
      return { value: null };
    }
    case "dump": {
      const file = await db.dumpDataDir(msg.compression);
      const buffer = await file.arrayBuffer();
      return { value: { buffer, type: file.type }, transfer: [buffer] };
    }
    case "close":
      await db.close();
      return { value: null };
    default:
      throw new Error(`unknown op ${msg.op}`);
  }
}

const opening = open();
// An open that failed is answered to every message (the first is "ready").
opening.catch(() => {});

port.on("message", (msg) => {
  opening
    .then((db) => handle(db, msg))
    .then(
      ({ value, transfer }) => {
        try {
          port.postMessage({ id: msg.id, ok: true, value }, transfer ?? []);
        } catch (e) {
          port.postMessage({ id: msg.id, ok: false, error: errorData(e) });
        }
        if (msg.op === "close") port.close();
      },
      (e) => port.postMessage({ id: msg.id, ok: false, error: errorData(e) }),
    );
});
