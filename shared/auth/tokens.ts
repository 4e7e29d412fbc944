/**
 * Personal access tokens: `wsp_` + 256 random bits (base64url). Only the SHA-256
 * hash is stored; the token is shown once at creation.
 */
import { randomBytes, sha256Hex, toBase64Url } from "../crypto/encoding";

export const TOKEN_PREFIX = "wsp_";

export function generateToken(): string {
  return TOKEN_PREFIX + toBase64Url(randomBytes(32));
}

export const hashToken = sha256Hex;

/** What a token list shows: enough to recognize a token, useless to replay it. */
export function displayPrefix(token: string): string {
  return token.slice(0, TOKEN_PREFIX.length + 6);
}
