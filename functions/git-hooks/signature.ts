/**
 * The signature checks of the push webhook, on WebCrypto only (the Worker runs
 * this code too). Every comparison takes time that depends on the lengths of
 * fixed-size digests, never on where the first differing byte is.
 */

const encoder = new TextEncoder();

/** True when both arrays hold the same bytes; the time depends only on the length. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export async function hmacSha256(secret: string, body: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, body));
}

export async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;

/** 64 hex digits as 32 bytes, or null for anything else. */
export function hexDigest(text: string): Uint8Array | null {
  if (!HEX_SHA256.test(text)) return null;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = Number.parseInt(text.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/**
 * A hex HMAC-SHA256 of the body (GitHub, Gitea/Forgejo, Bitbucket). The HMAC is
 * computed even when the header is malformed, so a bad header and a wrong
 * signature cost the same.
 */
export async function verifyHmacHex(secret: string, body: Uint8Array<ArrayBuffer>, hex: string | null): Promise<boolean> {
  const expected = await hmacSha256(secret, body);
  const given = hex === null ? null : hexDigest(hex);
  return equalBytes(expected, given ?? new Uint8Array(expected.length + 1)) && given !== null;
}

/**
 * A shared token sent as is (GitLab's X-Gitlab-Token): both sides are hashed
 * first, so the comparison is over 32 bytes whatever the lengths of the token
 * sent and of the secret.
 */
export async function verifyToken(secret: string, token: string | null): Promise<boolean> {
  const expected = await sha256(encoder.encode(secret));
  const given = await sha256(encoder.encode(token ?? ""));
  return equalBytes(expected, given) && token !== null;
}
