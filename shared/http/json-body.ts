/**
 * Strict JSON bodies: a route that takes a body refuses an empty body, another
 * media type, malformed JSON or a non-object with a 400, before validation runs
 * (the stock validator would treat them as `{}`), and strings Postgres cannot
 * store faithfully (see safe-text.ts).
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./context";
import { badRequest } from "./errors";
import { findUnsafeText, UNSAFE_TEXT_DETAIL } from "./safe-text";

const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;

export const jsonBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim();
  if (!JSON_TYPE.test(type)) throw badRequest(undefined, "Request body must be JSON (Content-Type: application/json)");
  const text = await c.req.text();
  if (!text.trim()) throw badRequest(undefined, "Request body is empty; a JSON object is required");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest(undefined, "Request body is not valid JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw badRequest(undefined, "Request body must be a JSON object");
  }
  const unsafe = findUnsafeText(parsed);
  if (unsafe) throw badRequest(unsafe, `${unsafe} ${UNSAFE_TEXT_DETAIL}`);
  // Hand the parsed value to the validator instead of parsing twice.
  c.req.bodyCache.json = Promise.resolve(parsed);
  return next();
};
