/**
 * Terminal escapes out of text meant for people: build tools colour their
 * output, and those bytes must not reach a failure reason, a webhook's JSON, an
 * e-mail or a chat message (the stored log lines keep them as sent).
 *
 * Removed (ECMA-48): CSI sequences (`ESC [` or C1 `0x9b`, parameters,
 * intermediates, a final byte: colours, cursor moves), control strings (OSC
 * `ESC ]` / `0x9d`, DCS, SOS, PM, APC: window titles, hyperlinks) up to BEL, ST
 * (`ESC \` or `0x9c`) or the next ESC, other escapes (`ESC` + intermediates +
 * a final byte: charset choices, keypad modes), a lone ESC, and every other C1
 * control. One pass over the text, each character looked at once: the input is
 * untrusted output, so no regular expression that could backtrack over it.
 */

const ESC = 0x1b;
const BEL = 0x07;
const CSI_C1 = 0x9b;
const OSC_C1 = 0x9d;
const ST_C1 = 0x9c;

const isC1 = (c: number) => c >= 0x80 && c <= 0x9f;
/** Anything the stripper acts on: ESC or a C1 control. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding escape characters is what it is for.
const ESCAPE_START = /[\u001b\u0080-\u009f]/;

/** Index after a CSI's parameters, intermediates and final byte, starting at `i` (just past `ESC [` or 0x9b). */
function endOfCsi(s: string, i: number): number {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c >= 0x40 && c <= 0x7e) return i + 1; // final byte
    if (c < 0x20 || c > 0x3f) return i; // not part of a CSI: the sequence was cut short, the character stays
    i++;
  }
  return i;
}

/** Index after a control string starting at `i` (just past its introducer): up to BEL or ST, or before the next ESC. */
function endOfControlString(s: string, i: number): number {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c === BEL || c === ST_C1) return i + 1;
    if (c === ESC) return s.charCodeAt(i + 1) === 0x5c ? i + 2 : i;
    i++;
  }
  return i;
}

/** Index after the escape starting at `i` (an ESC or a C1 control). */
function endOfEscape(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === CSI_C1) return endOfCsi(s, i + 1);
  if (c === OSC_C1 || c === 0x90 || c === 0x98 || c === 0x9e || c === 0x9f) return endOfControlString(s, i + 1);
  if (c !== ESC) return i + 1; // another C1 control
  const next = s.charCodeAt(i + 1);
  if (next === 0x5b) return endOfCsi(s, i + 2); // [
  // ] P X ^ _ : OSC, DCS, SOS, PM, APC
  if (next === 0x5d || next === 0x50 || next === 0x58 || next === 0x5e || next === 0x5f) return endOfControlString(s, i + 2);
  let j = i + 1;
  while (j < s.length && s.charCodeAt(j) >= 0x20 && s.charCodeAt(j) <= 0x2f) j++; // intermediates
  const final = s.charCodeAt(j);
  if (final >= 0x30 && final <= 0x7e) return j + 1;
  return i + 1; // a lone ESC: only it goes
}

/** The text without terminal escapes (everything else kept, line breaks included). */
export function stripAnsi(text: string): string {
  if (!ESCAPE_START.test(text)) return text;
  let out = "";
  let from = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== ESC && !isC1(c)) {
      i++;
      continue;
    }
    out += text.slice(from, i);
    i = endOfEscape(text, i);
    from = i;
  }
  return out + text.slice(from);
}

/** Every string in a JSON value without terminal escapes (object keys included); other values as they are. */
export function stripAnsiDeep<T>(value: T): T {
  if (typeof value === "string") return stripAnsi(value) as T;
  if (Array.isArray(value)) return value.map(stripAnsiDeep) as T;
  if (value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [stripAnsi(k), stripAnsiDeep(v)])) as T;
  }
  return value;
}
