/**
 * Postgres text cannot hold NUL, and a lone UTF-16 surrogate would be stored as
 * U+FFFD: both are refused at the edge, once for every route, so no handler can
 * turn such input into a 500 or a silently changed value.
 */
import type { Context } from "hono";
import type { AppEnv } from "./context";
import { badRequest } from "./errors";

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is exactly what this refuses.
const UNSAFE = /[\u0000]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const isUnsafeText = (s: string) => UNSAFE.test(s);

/**
 * The dotted path of the first unsafe string (or object key) in a JSON value, if
 * any. Iterative, with parent links instead of copied paths, so it stays linear
 * in the size of the value whatever its depth.
 */
export function findUnsafeText(value: unknown): string | undefined {
  type Frame = { value: unknown; key?: string; parent?: Frame };
  const pathOf = (frame: Frame) => {
    const keys: string[] = [];
    for (let f: Frame | undefined = frame; f?.key !== undefined; f = f.parent) keys.push(f.key);
    return keys.reverse().join(".") || "body";
  };
  const stack: Frame[] = [{ value }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.key !== undefined && isUnsafeText(frame.key)) return pathOf(frame);
    const current = frame.value;
    if (typeof current === "string") {
      if (isUnsafeText(current)) return pathOf(frame);
      continue;
    }
    if (current === null || typeof current !== "object") continue;
    const entries = Object.entries(current);
    // Pushed in reverse so the first unsafe value in document order is found first.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!;
      stack.push({ value: child, key, parent: frame });
    }
  }
  return undefined;
}

export const UNSAFE_TEXT_DETAIL = "must not contain NUL characters or unpaired surrogates";

/**
 * Unsafe query values are 400 (path ids go through `pathId`, which makes them match nothing).
 * Called by the guard (shared/http/guard.ts) as it hands over to the route, rather than as a
 * middleware of its own: one fewer step on every request.
 */
export function assertSafeQuery(c: Context<AppEnv>): void {
  // Most requests have no query string: parsing the URL's (an empty one) cost more than the route's own work.
  if (!c.req.url.includes("?")) return;
  for (const [key, values] of Object.entries(c.req.queries())) {
    if (isUnsafeText(key) || values.some(isUnsafeText)) throw badRequest(key, `${key} ${UNSAFE_TEXT_DETAIL}`);
  }
}
