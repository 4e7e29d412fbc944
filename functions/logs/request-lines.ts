/**
 * The compact text form of `request` (server-log) lines, as stored in a batch row
 * (request_log_batches.lines, shared/db/schema/logs.ts): one line per request,
 * newline-terminated, its fields separated by tabs in a fixed order. A field's
 * backslash, tab, newline, carriage return and NUL are escaped (`\\`, `\t`, `\n`,
 * `\r`, `\0`), and `\N` alone is null, as in Postgres' COPY text format, so
 * encoding and decoding are one linear pass each and no value can break a line.
 *
 * Why text and not a row or a JSON object per line: every request through the
 * edge is a line, and the edge and the database spend their CPU on the same cores
 * as the apps; a template string per request and one text value per batch cost a
 * fraction of a JSON document per request.
 */

/** One request the edge received; `at` in milliseconds since the epoch. */
export interface RequestLine {
  at: number;
  deploymentId: string | null;
  method: string;
  host: string | null;
  path: string;
  status: number;
  durationMs: number;
  bytes: number;
  clientAddress: string;
  environment: string | null;
  rule: string | null;
}

const SPECIAL = /[\\\t\n\r\0]/;
const SPECIALS = /[\\\t\n\r\0]/g;
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0" };

function esc(value: string): string {
  return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c]!) : value;
}

const nullable = (value: string | null): string => (value === null ? "\\N" : esc(value));

/** One line of the compact form, with its newline. */
export function encodeRequestLine(l: RequestLine): string {
  // join, not a template: one flat string. A template's result is a tree of string pieces, and a line waits
  // in the writer's queue for up to a flush interval: on the edge's hot path, every piece then survived
  // a young-generation collection or two (copied, then promoted), which lengthened those pauses.
  return [
    l.at,
    nullable(l.deploymentId),
    esc(l.method),
    nullable(l.host),
    esc(l.path),
    l.status,
    l.durationMs,
    l.bytes,
    esc(l.clientAddress),
    nullable(l.environment),
    `${nullable(l.rule)}\n`,
  ].join("\t");
}

const UNESCAPES: Record<string, string> = { "\\": "\\", t: "\t", n: "\n", r: "\r", "0": "\0" };

function unesc(field: string): string {
  if (!field.includes("\\")) return field;
  let out = "";
  for (let i = 0; i < field.length; i++) {
    const c = field[i]!;
    if (c !== "\\" || i + 1 === field.length) out += c;
    else out += UNESCAPES[field[++i]!] ?? field[i];
  }
  return out;
}

const unnull = (field: string | undefined): string | null => (field === undefined || field === "\\N" ? null : unesc(field));
const int = (field: string | undefined): number => {
  const n = Number(field);
  return Number.isFinite(n) ? Math.trunc(n) : 0;
};

/** The lines of a batch's text, in order; a malformed line (never written so) decodes with empty or zero fields rather than failing its page. */
export function decodeRequestLines(text: string): RequestLine[] {
  const out: RequestLine[] = [];
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf("\n", start);
    if (end === -1) end = text.length;
    const f = text.slice(start, end).split("\t");
    start = end + 1;
    out.push({
      at: int(f[0]),
      deploymentId: unnull(f[1]),
      method: unesc(f[2] ?? ""),
      host: unnull(f[3]),
      path: unesc(f[4] ?? ""),
      status: int(f[5]),
      durationMs: int(f[6]),
      bytes: int(f[7]),
      clientAddress: unesc(f[8] ?? ""),
      environment: unnull(f[9]),
      rule: unnull(f[10]),
    });
  }
  return out;
}
