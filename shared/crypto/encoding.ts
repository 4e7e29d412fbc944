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
 * paid it in full. Each byte is handed out once, as a copy.
 */
const POOL_BYTES = 4096;
let pool = new Uint8Array(0);
let poolOffset = 0;

export function randomBytes(n: number): Uint8Array<ArrayBuffer> {
  if (n > POOL_BYTES / 4) return crypto.getRandomValues(new Uint8Array(n));
  if (poolOffset + n > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
    poolOffset = 0;
  }
  const out = pool.slice(poolOffset, poolOffset + n);
  // Handed out bytes are wiped from the pool: a later read of it (a heap dump) does not reveal them.
  pool.fill(0, poolOffset, poolOffset + n);
  poolOffset += n;
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
