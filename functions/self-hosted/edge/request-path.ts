/**
 * The request target as the edge sees it: normalized once per request into the
 * path that route rules match and the server log records, and the target sent
 * on to the app.
 *
 * Normalization (so `/admin` cannot be walked around):
 * - absolute-form (`GET http://host/admin`) → its path (the edge routes by the
 *   Host header; the app gets origin-form with that Host, so it sees the same
 *   host and path the rules saw); asterisk-form and anything not starting with
 *   `/` is read as `/` + it;
 * - the query (and a fragment, never sent by browsers) is cut off;
 * - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded
 *   (`/%61dmin` → `/admin`); every other escape is kept, hex upper-cased, so
 *   `%2F` stays `%2F`: it is data inside a segment, not a separator (RFC 3986
 *   §2.2), and decoding it would change what many apps route;
 * - a backslash is a slash (`/admin\x` → `/admin/x`): WHATWG URL (Node's
 *   `new URL`, hence Express behind it) and IIS read it so, and the app gets
 *   the rewritten path, so every app reads what the rules read;
 * - repeated slashes collapse; dot segments resolve (RFC 3986 §5.2.4), never
 *   above the root (`/../admin` → `/admin`).
 *
 * Refused (`match` empty, which the rules answer with 400; never forwarded):
 * forms that app servers read in different ways, so no one path could stand
 * for all of them:
 * - a control character, raw or escaped (`%00`-`%1F`, `%7F`): C servers cut
 *   the path at NUL, others keep it;
 * - `%5C` (a backslash that IIS and some proxies decode into a separator) and
 *   `%3B` (a `;` that servlet containers may decode before cutting parameters);
 * - a segment ending in `.` or a space (`/admin.`, `/admin%2e`, `/admin%20`),
 *   in any form matched: Windows file systems and IIS strip them, so the app
 *   may serve `/admin`.
 *
 * One pass per step over at most MAX_TARGET characters (longer targets are
 * refused with 414 before this runs): linear time.
 *
 * The app receives the NORMALIZED path plus the original query: it then routes
 * exactly the path the rules were matched against, whatever its own notion of
 * `..`, `//` or `%61` is. Two readings remain that some apps make and the edge
 * does not apply to the forwarded path, so rules are matched against those
 * forms too (`match`; a rule that matches any of them applies, and as every
 * rule can only refuse, a wider match never lets more through):
 * - `%2F` decoded into a separator (`/admin%2Fx` is also `/admin/x`);
 * - path parameters cut off each segment, as servlet containers do
 *   (`/admin;x=1` is also `/admin`, `/public/..;/admin` also `/admin`).
 * Case is kept: a rule on `/admin` does not cover `/ADMIN` (an app that routes
 * case-insensitively needs a glob or a rule per spelling).
 */

/** Longest request target (path and query) the edge takes; longer: 414. (nginx's default line buffer is 8 KiB too.) */
export const MAX_TARGET = 8 * 1024;

export interface RequestPath {
  /** The normalized path: what rules match and the log records. */
  path: string;
  /** The normalized path with the original query (`?…`, or ""): what the app receives. */
  forward: string;
  /**
   * The paths rules are matched against: the path, then its forms with `%2F` read as `/` and without `;` parameters, when they differ.
   * Empty when the path is refused (see above): the rules answer 400.
   */
  match: string[];
}

const isUnreserved = (c: number) =>
  (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e;

const hexValue = (c: number) => (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1);

/** Decodes escapes of unreserved characters; upper-cases the hex of the others. `slashes`: also decode %2F to `/`. */
function decodeUnreserved(path: string, slashes: boolean): string {
  if (!path.includes("%")) return path;
  let out = "";
  let from = 0;
  for (let i = 0; i < path.length; i++) {
    if (path.charCodeAt(i) !== 0x25 || i + 2 >= path.length) continue;
    const hi = hexValue(path.charCodeAt(i + 1));
    const lo = hexValue(path.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) continue;
    const code = hi * 16 + lo;
    out += path.slice(from, i);
    out += isUnreserved(code) || (slashes && code === 0x2f) ? String.fromCharCode(code) : path.slice(i, i + 3).toUpperCase();
    from = i + 3;
    i += 2;
  }
  return out + path.slice(from);
}

/** Collapses `//` and resolves `.` and `..` segments (never above the root); keeps a trailing slash. */
export function removeDotSegments(path: string): string {
  const out: string[] = [];
  let trailing = false;
  let start = 0;
  while (start <= path.length) {
    let end = path.indexOf("/", start);
    if (end < 0) end = path.length;
    const segment = path.slice(start, end);
    trailing = false;
    if (segment === "..") {
      out.pop();
      trailing = true;
    } else if (segment === ".") trailing = true;
    else if (segment === "") trailing = end === path.length && out.length > 0;
    else out.push(segment);
    start = end + 1;
  }
  if (out.length === 0) return "/";
  return `/${out.join("/")}${trailing ? "/" : ""}`;
}

/** Each segment without its `;` parameters. */
function stripParams(path: string): string {
  let out = "";
  let skipping = false;
  for (let i = 0; i < path.length; i++) {
    const ch = path[i]!;
    if (ch === "/") skipping = false;
    else if (ch === ";") skipping = true;
    if (!skipping) out += ch;
  }
  return out;
}

const isControl = (c: number) => c < 0x20 || c === 0x7f;

/** A control character (raw or escaped), `%5C` or `%3B`: forms app servers read differently. */
function hasAmbiguousChar(path: string): boolean {
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (isControl(c)) return true;
    if (c !== 0x25 || i + 2 >= path.length) continue;
    const hi = hexValue(path.charCodeAt(i + 1));
    const lo = hexValue(path.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) continue;
    const code = hi * 16 + lo;
    if (isControl(code) || code === 0x5c || code === 0x3b) return true;
  }
  return false;
}

/**
 * A segment ending in `.` or a space (raw or `%20`), which Windows servers strip. Pieces between
 * `%2F`s count as segments too, but a `.` or `..` piece there is a dot segment of the `%2F`-decoded
 * form (matched as such), not a name with a trailing dot.
 */
function hasTrailingBlank(path: string): boolean {
  let start = 1;
  for (let i = 1; i <= path.length; i++) {
    const slash = i === path.length || path[i] === "/";
    const escaped = !slash && path.startsWith("%2F", i);
    if (!slash && !escaped) continue;
    const piece = path.slice(start, i);
    if (piece !== "." && piece !== ".." && (piece.endsWith(".") || piece.endsWith(" ") || piece.endsWith("%20"))) return true;
    if (escaped) i += 2;
    start = i + 1;
  }
  return false;
}

/**
 * Paths that normalization leaves as they are and that have one reading only: segments of
 * unreserved characters (no `%`, `;`, `\`, control character or space), none empty, none
 * starting or ending with `.` (so no dot segment and no trailing dot), an optional final `/`.
 * Nearly every request's path is one; it skips the passes below (measured on the edge's hot path).
 */
const PLAIN_PATH = /^\/(?:[A-Za-z0-9_~-](?:[A-Za-z0-9._~-]*[A-Za-z0-9_~-])?(?:\/[A-Za-z0-9_~-](?:[A-Za-z0-9._~-]*[A-Za-z0-9_~-])?)*\/?)?$/;

/** Normalizes a request target (see above); null when it is longer than MAX_TARGET. */
export function requestPath(url: string | undefined): RequestPath | null {
  const raw = url || "/";
  if (raw.length > MAX_TARGET) return null;
  if (raw.indexOf("#") < 0) {
    const q = raw.indexOf("?");
    const target = q < 0 ? raw : raw.slice(0, q);
    if (PLAIN_PATH.test(target)) return { path: target, forward: raw, match: [target] };
  }
  let cut = raw.length;
  const q = raw.indexOf("?");
  const hash = raw.indexOf("#");
  if (hash >= 0) cut = hash;
  if (q >= 0 && q < cut) cut = q;
  const query = q >= 0 && q < (hash < 0 ? raw.length : hash) ? raw.slice(q, hash < 0 ? raw.length : hash) : "";
  let target = raw.slice(0, cut).replaceAll("\\", "/");
  if (!target.startsWith("/")) {
    const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(target);
    if (scheme) {
      const slash = target.indexOf("/", scheme[0].length);
      target = slash < 0 ? "/" : target.slice(slash);
    } else target = `/${target === "*" ? "" : target}`;
  }
  const path = removeDotSegments(decodeUnreserved(target, false));
  const forms = new Set([path]);
  if (path.includes("%2F")) forms.add(removeDotSegments(decodeUnreserved(path, true)));
  for (const form of [...forms]) if (form.includes(";")) forms.add(removeDotSegments(stripParams(form)));
  const match = [...forms];
  if (hasAmbiguousChar(path) || match.some(hasTrailingBlank)) return { path, forward: path, match: [] };
  return { path, forward: `${path}${query}`, match };
}
