/**
 * Personal access tokens: `wsp_` + 256 random bits (base64url). Only the SHA-256
 * hash is stored; the token is shown once at creation.
 */
import { randomBytes, sha256Hex, toBase64Url } from "../crypto/encoding";

export const TOKEN_PREFIX = "wsp_";
/** Deployment-session tokens (short-lived, read-only, one project): recognizable in logs and scanners. */
export const SESSION_TOKEN_PREFIX = "wsd_";
/** Log-stream tokens (60 s to connect, one project's server-log stream, sent in a URL because EventSource cannot set headers). */
export const LOG_STREAM_TOKEN_PREFIX = "wsl_";
/** Runner tokens of build servers (one per server, bound to its organization): accepted by the runner protocol only. */
export const RUNNER_TOKEN_PREFIX = "wsr_";

export function generateToken(prefix: string = TOKEN_PREFIX): string {
  return prefix + toBase64Url(randomBytes(32));
}

export const hashToken = sha256Hex;

/** What a token list shows: enough to recognize a token, useless to replay it. */
export function displayPrefix(token: string): string {
  return token.slice(0, TOKEN_PREFIX.length + 6);
}
