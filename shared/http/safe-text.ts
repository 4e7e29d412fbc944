/**
 * Postgres text cannot hold NUL, and a lone UTF-16 surrogate would be stored as
 * U+FFFD: both are refused at the edge, once for every route, so no handler can
 * turn such input into a 500 or a silently changed value.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./context";
import { badRequest } from "./errors";

const UNSAFE = /[\u0000]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const isUnsafeText = (s: string) => UNSAFE.test(s);

/** The dotted path of the first unsafe string (or object key) in a JSON value, if any. */
export function findUnsafeText(value: unknown, path: string[] = []): string | undefined {
  if (typeof value === "string") return isUnsafeText(value) ? path.join(".") || "body" : undefined;
  if (value === null || typeof value !== "object") return undefined;
  for (const [key, child] of Object.entries(value)) {
    const childPath = [...path, key];
    if (isUnsafeText(key)) return childPath.join(".");
    const found = findUnsafeText(child, childPath);
    if (found) return found;
  }
  return undefined;
}

export const UNSAFE_TEXT_DETAIL = "must not contain NUL characters or unpaired surrogates";

/** Unsafe query values are 400 (path ids go through `pathId`, which makes them match nothing). */
export const safeQuery: MiddlewareHandler<AppEnv> = async (c, next) => {
  for (const [key, values] of Object.entries(c.req.queries())) {
    if (isUnsafeText(key) || values.some(isUnsafeText)) throw badRequest(key, `${key} ${UNSAFE_TEXT_DETAIL}`);
  }
  return next();
};
