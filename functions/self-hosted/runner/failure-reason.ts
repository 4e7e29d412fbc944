/**
 * A failed step's reason, for a person to act on: the headline (the step, how
 * it ended, its command), then the FIRST lines that look like an error, with
 * the lines that follow them (a compiler's code frame), then the last lines.
 * Build tools print the cause first and a stack trace or a summary after it, so
 * the last lines alone often miss it.
 *
 * Error shapes of Node toolchains: the word `error` (any case: `error TS2304`,
 * `Error:`, `SyntaxError:`), npm's `ERR!`, a bracketed code (`[PARSE_ERROR]`,
 * `[UNRESOLVED_IMPORT]`), a `file:line:col` location (`src/main.js:61:17`);
 * a stack frame (`at fn (file:1:2)`) is not an error line by its location.
 *
 * A step may print millions of lines: the digest sees each once, as it
 * streams, and keeps a bounded number (the first error lines, a ring of the
 * last ones), each cut to MAX_LINE_CHARS. Every check is a single forward
 * scan: the output is untrusted, so no regular expression that can backtrack.
 * Lines are kept without terminal escapes, carriage-return redraws and other
 * control characters; the stored log keeps them as sent. The reason is at most
 * MAX_REASON_BYTES of UTF-8, cut on a character boundary.
 */
import { stripAnsi } from "../../../shared/text/ansi";

export const MAX_REASON_BYTES = 1024;
/** The headline's share at most: a long command must leave room for the lines. */
const MAX_HEADLINE_BYTES = 320;
/** Error lines kept (each with its CONTEXT_AFTER following lines). */
const MAX_ERROR_LINES = 6;
const CONTEXT_AFTER = 2;
/** Lines of the excerpt at most (error lines and their context). */
const MAX_EXCERPT_LINES = 14;
const LAST_LINES = 10;
/** A kept line's length at most (characters); only this much of a line is searched for an error shape. */
const MAX_LINE_CHARS = 240;
const ELLIPSIS = "…";
/** Control characters but tab, left after the escapes are gone: a bell or a backspace means nothing in a reason. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is what it is for.
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/g;

interface Kept {
  n: number;
  text: string;
}

export interface FailureDigest {
  /** One line of the step's output, as printed. */
  add(line: string): void;
  /** The reason: `headline`, then the first error lines and the last lines seen. */
  reason(headline: string): string;
}

export function createFailureDigest(): FailureDigest {
  const excerpt: Kept[] = [];
  const last: Kept[] = [];
  let n = 0;
  let errors = 0;
  let contextLeft = 0;

  return {
    add(line) {
      const text = readable(line);
      if (text.trim() === "") return;
      const kept = { n: n++, text };
      last.push(kept);
      if (last.length > LAST_LINES) last.shift();
      if (excerpt.length >= MAX_EXCERPT_LINES) return;
      if (errors < MAX_ERROR_LINES && looksLikeError(text)) {
        errors++;
        excerpt.push(kept);
        contextLeft = CONTEXT_AFTER;
      } else if (contextLeft > 0) {
        contextLeft--;
        excerpt.push(kept);
      }
    },
    reason(headline) {
      return compose(headline, excerpt, last);
    },
  };
}

/** A line as a person reads it: escapes removed, only the last redraw of a carriage-return line, no control characters, cut. */
function readable(line: string): string {
  // Only the start of a long line is read: what is kept of it is shorter still.
  const read = MAX_LINE_CHARS * 8;
  const plain = stripAnsi(line.length > read ? line.slice(0, read) : line);
  // What a terminal shows of `50%\r100%`: the last non-empty part.
  let end = plain.length;
  while (end > 0 && plain.charCodeAt(end - 1) === 0x0d) end--;
  const start = plain.lastIndexOf("\r", end - 1) + 1;
  const cut = line.length > read || end - start > MAX_LINE_CHARS;
  let out = plain.slice(start, Math.min(end, start + MAX_LINE_CHARS)).replace(CONTROL, "");
  // A character cut in half (a lone high surrogate) goes too.
  const lastCode = out.charCodeAt(out.length - 1);
  if (lastCode >= 0xd800 && lastCode <= 0xdbff) out = out.slice(0, -1);
  out = out.trimEnd();
  return cut ? `${out}${ELLIPSIS}` : out;
}

const isWordChar = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isUpper = (c: number) => c >= 0x41 && c <= 0x5a;
/** Characters of a file path before `:line:col` (`src/main.js`, `/app/node_modules/@scope/x.mjs`, `C:\x`). */
const isPathChar = (c: number) => isWordChar(c) || c === 0x2e || c === 0x2f || c === 0x5c || c === 0x2d || c === 0x40 || c === 0x7e || c === 0x2b;

/** Whether a line has one of the usual error shapes (see the file's comment). */
export function looksLikeError(line: string): boolean {
  const lower = line.toLowerCase();
  if (hasWord(lower, "error") || line.includes("Error:") || line.includes("ERR!") || hasBracketedCode(line)) return true;
  // A stack frame names a location too, but it is the trace, not the error.
  return !line.trimStart().startsWith("at ") && hasLocation(line);
}

/** `word` (lowercase) as a whole word of `lower`: `error`, `error:`, `1 error`, not `errors` or `terror`. */
function hasWord(lower: string, word: string): boolean {
  for (let i = lower.indexOf(word); i !== -1; i = lower.indexOf(word, i + 1)) {
    const before = i === 0 ? 0x20 : lower.charCodeAt(i - 1);
    const after = i + word.length >= lower.length ? 0x20 : lower.charCodeAt(i + word.length);
    if (!isWordChar(before) && !isWordChar(after)) return true;
  }
  return false;
}

/** `[SOME_CODE]`: capitals, digits and at least one underscore, in brackets. */
function hasBracketedCode(line: string): boolean {
  let i = line.indexOf("[");
  while (i !== -1) {
    let j = i + 1;
    let underscore = false;
    while (j < line.length && (isUpper(line.charCodeAt(j)) || isDigit(line.charCodeAt(j)) || line.charCodeAt(j) === 0x5f)) {
      if (line.charCodeAt(j) === 0x5f) underscore = true;
      j++;
    }
    if (underscore && j - i > 3 && line.charCodeAt(j) === 0x5d && isUpper(line.charCodeAt(i + 1))) return true;
    // Whatever was scanned holds no `[`: the next search starts after it.
    i = line.indexOf("[", Math.max(j, i + 1));
  }
  return false;
}

/** `file.ext:line:col`: a path with a dot in its last part, a colon, digits, a colon, digits. */
function hasLocation(line: string): boolean {
  let pathLength = 0;
  let dotInName = false;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === 0x3a && pathLength > 0 && dotInName && digitsThenColonDigits(line, i + 1)) return true;
    if (isPathChar(c)) {
      pathLength++;
      if (c === 0x2f || c === 0x5c) dotInName = false;
      else if (c === 0x2e) dotInName = true;
    } else {
      pathLength = 0;
      dotInName = false;
    }
  }
  return false;
}

/** Whether `line` has `<digits>:<digits>` at `i` (each scan stops at the first non-digit: linear over the line). */
function digitsThenColonDigits(line: string, i: number): boolean {
  let j = i;
  while (j < line.length && isDigit(line.charCodeAt(j))) j++;
  if (j === i || line.charCodeAt(j) !== 0x3a) return false;
  return isDigit(line.charCodeAt(j + 1));
}

const encoder = new TextEncoder();
const bytesOf = (s: string) => encoder.encode(s).length;

/** At most `max` bytes of UTF-8, cut on a character boundary (an ellipsis marks the cut). */
export function cutToBytes(s: string, max: number): string {
  if (bytesOf(s) <= max) return s;
  const room = max - bytesOf(ELLIPSIS);
  let bytes = 0;
  let i = 0;
  while (i < s.length) {
    const cp = s.codePointAt(i)!;
    const size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes + size > room) break;
    bytes += size;
    i += cp > 0xffff ? 2 : 1;
  }
  return `${s.slice(0, i)}${ELLIPSIS}`;
}

/**
 * `headline; first error lines:\n…\nlast lines:\n…` within MAX_REASON_BYTES: the
 * error lines first, the last lines (those not already shown) in what is left,
 * the newest whole lines when they do not all fit.
 */
function compose(headline: string, excerpt: Kept[], last: Kept[]): string {
  let out = cutToBytes(headline, MAX_HEADLINE_BYTES);
  const shown = new Set(excerpt.map((k) => k.n));
  const tail = last.filter((k) => !shown.has(k.n));
  const room = () => MAX_REASON_BYTES - bytesOf(out);
  const tailLabel = excerpt.length ? "\nlast lines:" : "; last lines:";
  // The last lines keep a share of the room: the final summary is often the second clue.
  const tailBytes = tail.length ? tail.reduce((sum, k) => sum + bytesOf(k.text) + 1, bytesOf(tailLabel)) : 0;
  const tailShare = Math.min(tailBytes, Math.floor(room() / 3));
  if (excerpt.length) {
    out += "; first error lines:";
    for (const k of excerpt) {
      const space = room() - tailShare - 1;
      if (space <= bytesOf(ELLIPSIS)) break;
      out += `\n${cutToBytes(k.text, space)}`;
    }
  }
  if (tail.length && room() > bytesOf(tailLabel) + 2) {
    let budget = room() - bytesOf(tailLabel);
    const lines: string[] = [];
    // Whole lines, newest first; only the newest may be cut (a half line further up tells nothing).
    for (let i = tail.length - 1; i >= 0; i--) {
      const text = lines.length ? tail[i]!.text : cutToBytes(tail[i]!.text, budget - 1);
      if (bytesOf(text) + 1 > budget) break;
      lines.unshift(text);
      budget -= bytesOf(text) + 1;
    }
    out += `${tailLabel}\n${lines.join("\n")}`;
  }
  return cutToBytes(out, MAX_REASON_BYTES);
}
