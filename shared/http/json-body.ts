/**
 * Strict, bounded JSON bodies. A route that takes a body refuses an empty body,
 * another media type, malformed JSON or a non-object with a 400, before
 * validation runs (the stock validator would treat them as `{}`), and strings
 * Postgres cannot store faithfully (see safe-text.ts).
 *
 * Hostile bodies are cheap to refuse: the size limit holds while reading, with or
 * without Content-Length (nothing is buffered past it: 413), and nesting deeper
 * than MAX_JSON_DEPTH is found by one linear pass over the text before
 * `JSON.parse`, so no later step (validation, the unsafe-text scan,
 * `JSON.stringify` on the way to the database) can recurse deeply.
 */
import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "./context";
import { ApiError, badRequest } from "./errors";
import { findUnsafeText, UNSAFE_TEXT_DETAIL } from "./safe-text";

/** Default request body limit of a JSON route (routes that need more declare `bodyLimit`). */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;
/** Deepest nesting of arrays and objects a request body may have. */
export const MAX_JSON_DEPTH = 64;

const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;

export const formatBytes = (bytes: number) => (bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`);

export const bodyTooLarge = (limit: number) =>
  new ApiError("payload_too_large", `The request body is larger than this route's limit of ${formatBytes(limit)} (${limit} bytes)`);

/**
 * The body's bytes (of a request, or of a response read from an upstream), read under `limit`: a larger Content-Length is refused
 * before a byte is read, and a body that grows past the limit is cut off (the
 * stream is cancelled; the server answers without reading the rest).
 */
export async function readBodyBytes(req: { headers: Headers; body: ReadableStream<Uint8Array> | null }, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = req.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limit) throw bodyTooLarge(limit);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw bodyTooLarge(limit);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/** The body as text (UTF-8), read under `limit` bytes like readBodyBytes. */
export async function readBodyText(req: { headers: Headers; body: ReadableStream<Uint8Array> | null }, limit: number): Promise<string> {
  return new TextDecoder().decode(await readBodyBytes(req, limit));
}

/** True when arrays/objects nest deeper than `max`; one pass, strings skipped, malformed text left to JSON.parse. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return false;
}

/** Checks a non-empty body text is a JSON object the validator may parse, or throws the 400. */
function checkObject(text: string): void {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw badRequest(undefined, `Request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  }
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
}

function hasJsonType(c: Context<AppEnv>): boolean {
  return JSON_TYPE.test((c.req.header("content-type") ?? "").split(";")[0]!.trim());
}

/** Hono caches body reads as promises (its type says plain values). */
type BodyPromises = { text?: Promise<string>; arrayBuffer?: Promise<ArrayBuffer> };

/** Hands the checked text to the validator (the stream itself has been read). */
function provide(c: Context<AppEnv>, text: string) {
  (c.req.bodyCache as BodyPromises).text = Promise.resolve(text);
}

/** A required JSON object body of at most `limit` bytes. */
export function jsonBody(limit = MAX_JSON_BODY_BYTES): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!hasJsonType(c)) throw badRequest(undefined, "Request body must be JSON (Content-Type: application/json)");
    const text = await readBodyText(c.req.raw, limit);
    if (!text.trim()) throw badRequest(undefined, "Request body is empty; a JSON object is required");
    checkObject(text);
    provide(c, text);
    return next();
  };
}

/**
 * An optional JSON object body: no body, or an empty one whatever its
 * Content-Type, reads as `{}`; any other body follows the strict rules.
 */
export function optionalJsonBody(limit = MAX_JSON_BODY_BYTES): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const text = await readBodyText(c.req.raw, limit);
    if (text.trim() === "") {
      // Read as no body at all by what follows (the OpenAPI validator looks for a body it can no longer read).
      (c.req.bodyCache as BodyPromises).arrayBuffer = Promise.resolve(new ArrayBuffer(0));
      provide(c, "{}");
      return next();
    }
    if (!hasJsonType(c)) throw badRequest(undefined, "Request body must be JSON (Content-Type: application/json)");
    checkObject(text);
    provide(c, text);
    return next();
  };
}
