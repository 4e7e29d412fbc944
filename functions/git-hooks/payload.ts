/**
 * A delivery's body: read raw under the size limit (the signature covers the
 * exact bytes, so nothing is parsed before it is checked), then parsed as a
 * JSON object with bounded nesting. GitHub and Gitea can also post the JSON as
 * the `payload` field of a form (`application/x-www-form-urlencoded`); both are read.
 */
import { badRequest } from "../../shared/http/errors";
import { MAX_JSON_BODY_BYTES, MAX_JSON_DEPTH, nestsDeeperThan, readBodyBytes } from "../../shared/http/json-body";

/** Largest delivery accepted (413 past it, with or without Content-Length). */
export const MAX_DELIVERY_BYTES = MAX_JSON_BODY_BYTES;

export interface RawBody {
  text: string;
  /** The bytes received, exactly: what the signature is checked over. */
  bytes: Uint8Array<ArrayBuffer>;
}

export async function readRawBody(req: Request): Promise<RawBody> {
  // The signature is over the exact bytes sent: keep them, and decode a copy for parsing.
  const bytes = await readBodyBytes(req, MAX_DELIVERY_BYTES);
  return { text: new TextDecoder().decode(bytes), bytes };
}

const FORM_TYPE = /^application\/x-www-form-urlencoded$/i;

/** The payload object, or the 400 naming what is wrong. */
export function parsePayload(text: string, contentType: string | undefined): Record<string, unknown> {
  let json = text;
  if (FORM_TYPE.test((contentType ?? "").split(";")[0]!.trim())) {
    const field = new URLSearchParams(text).get("payload");
    if (field === null) throw badRequest("payload", "A form-encoded delivery must carry the JSON in its payload field");
    json = field;
  }
  if (nestsDeeperThan(json, MAX_JSON_DEPTH)) throw badRequest(undefined, `Request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw badRequest(undefined, "Request body is not valid JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw badRequest(undefined, "Request body must be a JSON object");
  return parsed as Record<string, unknown>;
}
