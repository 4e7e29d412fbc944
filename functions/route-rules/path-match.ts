/**
 * The path part of a route rule. A plain path is a prefix on segment boundaries
 * (`/api` matches `/api`, `/api/` and `/api/users`, not `/apix`); a path with `*`
 * is a glob where `*` matches within one segment and `**` across segments
 * (`/static/*.js`, `/admin/**`). Matching is iterative with one saved star
 * position per kind, so its time is at most the path length times the pattern
 * length (patterns are at most 200 characters): no backtracking blow-up on
 * hostile paths.
 */
export const MAX_PATTERN = 200;

export function pathMatches(pattern: string | null, path: string): boolean {
  if (pattern === null) return true;
  if (!pattern.includes("*")) {
    if (pattern === "/" || pattern === path) return true;
    const base = pattern.endsWith("/") ? pattern : `${pattern}/`;
    return path.startsWith(base) || path === pattern.slice(0, -1);
  }
  return globMatches(pattern, path);
}

/**
 * Wildcard matching with a single backtrack point per star (the classic linear
 * greedy algorithm): a later star supersedes an earlier one, which is correct
 * for `**`; a single `*` may not cross `/`, so its backtrack stops at a slash.
 */
function globMatches(pattern: string, path: string): boolean {
  let p = 0;
  let s = 0;
  let starP = -1;
  let starS = -1;
  let starCrossesSlash = false;
  while (s < path.length) {
    if (p < pattern.length && pattern[p] === "*") {
      const double = pattern[p + 1] === "*";
      starCrossesSlash = double;
      p += double ? 2 : 1;
      starP = p;
      starS = s;
    } else if (p < pattern.length && pattern[p] === path[s]) {
      p++;
      s++;
    } else if (starP >= 0 && (starCrossesSlash || path[starS] !== "/")) {
      starS++;
      s = starS;
      p = starP;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}
