/**
 * The path part of a route rule. A plain path is a prefix on segment boundaries
 * (`/api` matches `/api`, `/api/` and `/api/users`, not `/apix`; `/` matches
 * every path); a path with `*` is a glob over the whole path where `*` matches
 * within one segment (any characters but `/`, possibly none) and `**` across
 * segments (any characters). A `/**` followed by `/` or by the end of the
 * pattern may also match nothing at all, slash included: `/admin/**` matches
 * `/admin` itself, and `/**` + `/x` matches `/x` at the root (as in .gitignore).
 *
 * Matching simulates the pattern as a small NFA (one state per pattern token,
 * the set of live states advanced one path character at a time), so it needs
 * no backtracking: its time is at most the path length times the pattern length
 * (patterns are at most MAX_PATTERN characters), whatever the input.
 */
export const MAX_PATTERN = 200;

export function pathMatches(pattern: string | null, path: string): boolean {
  if (pattern === null) return true;
  if (!pattern.includes("*")) {
    if (pattern === "/" || pattern === path) return true;
    // `/api/` also matches `/api` itself (the old code let `/api` match `/ap`).
    if (pattern.endsWith("/")) return path.startsWith(pattern) || path === pattern.slice(0, -1);
    return path.startsWith(`${pattern}/`);
  }
  return globMatches(compile(pattern), path);
}

const STAR = -1;
const DOUBLE_STAR = -2;

interface Compiled {
  /** Per token: a character code, STAR or DOUBLE_STAR. */
  tokens: Int32Array;
  /** Per token: where an epsilon move from it leads (the token after a skippable `/**`), else -1. */
  skip: Int32Array;
}

/** Compiled patterns (rules are few and reused for every request). */
const cache = new Map<string, Compiled>();

function compile(pattern: string): Compiled {
  const hit = cache.get(pattern);
  if (hit) return hit;
  const list: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "*") list.push(pattern.charCodeAt(i));
    else {
      // Any run of 2+ stars is one `**`; a lone star is `*`.
      let j = i;
      while (pattern[j + 1] === "*") j++;
      list.push(j > i ? DOUBLE_STAR : STAR);
      i = j;
    }
  }
  const tokens = Int32Array.from(list);
  const skip = new Int32Array(tokens.length).fill(-1);
  for (let t = 0; t + 1 < tokens.length; t++) {
    // `/**` then `/` or the end: from the slash, jump past the `**` (the next `/` or the end stays to be matched).
    if (tokens[t] === 47 && tokens[t + 1] === DOUBLE_STAR && (t + 2 === tokens.length || tokens[t + 2] === 47)) skip[t] = t + 2;
  }
  const compiled = { tokens, skip };
  if (cache.size > 1_000) cache.clear();
  cache.set(pattern, compiled);
  return compiled;
}

/** Adds state `s` and what it reaches without reading a character (a star may match nothing; a skippable `/**`). */
function add(c: Compiled, live: Uint8Array, list: Int32Array, count: number, s: number): number {
  // Epsilon chains only move forward, so this loop (not recursion) visits each state at most once.
  let n = count;
  let at = s;
  while (at <= c.tokens.length && live[at] === 0) {
    live[at] = 1;
    list[n++] = at;
    if (at === c.tokens.length) break;
    const skipTo = c.skip[at]!;
    if (skipTo >= 0) n = add(c, live, list, n, skipTo);
    const t = c.tokens[at]!;
    if (t === STAR || t === DOUBLE_STAR) at++;
    else break;
  }
  return n;
}

function globMatches(c: Compiled, path: string): boolean {
  const size = c.tokens.length + 1;
  let live = new Uint8Array(size);
  let next = new Uint8Array(size);
  let list = new Int32Array(size);
  let nextList = new Int32Array(size);
  let count = add(c, live, list, 0, 0);
  for (let i = 0; i < path.length && count > 0; i++) {
    const ch = path.charCodeAt(i);
    let n = 0;
    for (let k = 0; k < count; k++) {
      const s = list[k]!;
      if (s === c.tokens.length) continue;
      const t = c.tokens[s]!;
      if (t === DOUBLE_STAR || (t === STAR && ch !== 47)) n = add(c, next, nextList, n, s);
      else if (t === ch) n = add(c, next, nextList, n, s + 1);
    }
    for (let k = 0; k < count; k++) live[list[k]!] = 0;
    [live, next] = [next, live];
    [list, nextList] = [nextList, list];
    count = n;
  }
  return live[c.tokens.length] === 1;
}
