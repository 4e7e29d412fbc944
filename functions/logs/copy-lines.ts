/**
 * appendLogLines (store.ts) over node-postgres with COPY instead of INSERT … SELECT FROM json_to_recordset:
 * the same rows, numbers and transaction, for the batching writer (writer.ts) on Postgres.
 *
 * Why: chatty apps write thousands of lines a second (request lines were rows here too, until migration 0032
 * stored them by the batch), and Postgres' CPU per line is paid on the
 * same cores as the edge and its apps. Measured on the bench's machine (PostgreSQL 15, batches of 250
 * request lines): 33 µs of backend CPU per line through json_to_recordset, 20 µs through COPY (the JSON
 * parse of the whole batch and the record expansion are gone). Most of the rest was the three foreign keys,
 * checked per row: migration 0031 dropped them (and made the `at` index BRIN), and the edge bench's Postgres
 * CPU per request line went from ~30 µs to ~11 µs (shared/db/schema/logs.ts says what replaced them). The
 * edge's own side is cheaper too: a text row per line instead of an object per line plus one JSON.stringify
 * of the batch.
 *
 * node-postgres has no COPY of its own (pg-copy-streams adds one); CopyIn below is the few lines of the
 * protocol it needs (a "submittable": CopyInResponse → CopyData… CopyDone → CommandComplete → ReadyForQuery).
 */
import type pg from "pg";
import { byProject, capLine, type NewLogLine } from "./store";

/** COPY's text format: backslash, newline, carriage return and tab are escaped; `\N` is NULL. */
function copyText(value: string): string {
  return /[\\\n\r\t]/.test(value) ? value.replace(/[\\\n\r\t]/g, (c) => (c === "\\" ? "\\\\" : c === "\n" ? "\\n" : c === "\r" ? "\\r" : "\\t")) : value;
}

const COPY_SQL = "copy log_lines (project_id, seq, org_id, deployment_id, kind, stream, at, message, fields) from stdin";
/** CopyData messages of at most this many bytes (any size up to 1 GB is allowed; smaller ones keep the socket's writes even). */
const CHUNK_BYTES = 256 * 1024;

/** One COPY FROM STDIN of `data`, as a node-postgres submittable; resolves with the rows copied. */
class CopyIn {
  readonly text = COPY_SQL;
  private rows = 0;
  private settled = false;
  constructor(
    private readonly data: Buffer,
    private readonly done: (error: Error | null, rows: number) => void,
  ) {}
  submit(connection: { query(text: string): void }) {
    connection.query(this.text);
  }
  handleCopyInResponse(connection: { sendCopyFromChunk(chunk: Buffer): void; endCopyFrom(): void }) {
    for (let at = 0; at < this.data.length; at += CHUNK_BYTES) connection.sendCopyFromChunk(this.data.subarray(at, at + CHUNK_BYTES));
    connection.endCopyFrom();
  }
  handleCommandComplete(msg: { text?: string }) {
    this.rows = Number(/^COPY (\d+)/.exec(msg.text ?? "")?.[1] ?? 0);
  }
  // A server error is followed by ReadyForQuery, a lost connection by nothing: settle on the error itself.
  handleError(error: Error) {
    this.settle(error);
  }
  handleReadyForQuery() {
    this.settle(null);
  }
  // Not expected for COPY FROM; present so an odd answer cannot throw inside the driver.
  handleRowDescription() {}
  handleDataRow() {}
  handleEmptyQuery() {}
  handleCopyData() {}
  private settle(error: Error | null) {
    if (this.settled) return;
    this.settled = true;
    this.done(error, this.rows);
  }
}

function copyIn(client: pg.PoolClient, data: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    client.query(new CopyIn(data, (error, rows) => (error ? reject(error) : resolve(rows))) as unknown as pg.QueryConfig);
  });
}

/** Same contract as appendLogLines: one transaction, each project's lines numbered densely from its counter row. */
export async function copyLogLines(pool: pg.Pool, lines: NewLogLine[]): Promise<number> {
  if (lines.length === 0) return 0;
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("begin");
    try {
      let text = "";
      for (const [projectId, batch] of byProject(lines)) {
        const counter = await client.query<{ last: string }>(
          "insert into log_sequences (project_id, last) values ($1, $2) on conflict (project_id) do update set last = log_sequences.last + $2 returning last",
          [projectId, batch.length],
        );
        let seq = Number(counter.rows[0]!.last) - batch.length;
        const project = copyText(projectId);
        for (const l of batch) {
          seq++;
          const fields = l.fields == null ? "\\N" : copyText(JSON.stringify(l.fields));
          text += `${project}\t${seq}\t${copyText(l.orgId)}\t${l.deploymentId === null ? "\\N" : copyText(l.deploymentId)}\t${l.kind}\t${l.stream}\t${l.at.toISOString()}\t${copyText(capLine(l.message))}\t${fields}\n`;
        }
      }
      await copyIn(client, Buffer.from(text, "utf8"));
      await client.query("commit");
    } catch (error) {
      await client.query("rollback").catch((e: Error) => {
        broken = e;
      });
      throw error;
    }
  } finally {
    // A connection whose rollback failed is not handed to the next caller.
    client.release(broken);
  }
  return lines.length;
}
