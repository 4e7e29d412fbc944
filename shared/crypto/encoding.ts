import * as nodeCrypto from "node:crypto";
import { createHash } from "node:crypto";

const oneShotHash = typeof nodeCrypto.hash === "function" ? nodeCrypto.hash : undefined;

/** base64url without padding, and hex: the encodings used for tokens, ids and ciphertext. */
export function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/**
 * Random bytes are drawn from the system's CSPRNG POOL_BYTES at a time: one call costs ~16 µs here
 * whatever its size (a system call), and every request takes some (its request id), so a request
 * paid it in full. Each byte is handed out once, and wiped from the pool as it is: a later read of
 * the pool (a heap dump) does not reveal it.
 */
const POOL_BYTES = 4096;
let pool = new Uint8Array(0);
let poolOffset = 0;

/** Where the next `n` unused pooled bytes start (n ≤ POOL_BYTES / 4); the caller takes them and wipes them. */
function reserve(n: number): number {
  if (poolOffset + n > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
    poolOffset = 0;
  }
  const start = poolOffset;
  poolOffset += n;
  return start;
}

export function randomBytes(n: number): Uint8Array<ArrayBuffer> {
  if (n > POOL_BYTES / 4) return crypto.getRandomValues(new Uint8Array(n));
  const start = reserve(n);
  const out = pool.slice(start, start + n);
  pool.fill(0, start, start + n);
  return out;
}

/**
 * `n` random characters of `alphabet`, whose length must divide 256 (each character is then
 * uniform): one pooled byte each, read in place rather than copied out (ids are made on every request).
 */
export function randomText(n: number, alphabet: string): string {
  if (n > POOL_BYTES / 4 || 256 % alphabet.length !== 0) throw new RangeError("randomText: at most 1,024 characters, of an alphabet whose length divides 256");
  const start = reserve(n);
  let out = "";
  for (let i = start; i < start + n; i++) {
    out += alphabet[pool[i]! % alphabet.length];
    pool[i] = 0;
  }
  return out;
}

/**
 * SHA-256 of a string, hex. node:crypto (also on Workers with nodejs_compat):
 * on the per-request token check it costs a fraction of WebCrypto's digest.
 */
export function sha256Hex(text: string): string {
  // The one-shot hash (Node 21.7+) is a third of createHash's cost; workerd's node:crypto may lack it.
  return oneShotHash ? oneShotHash("sha256", text, "hex") : createHash("sha256").update(text).digest("hex");
}
