/**
 * Secrets at rest: AES-256-GCM through WebCrypto, the same code on Workers and Node.
 *
 * Ciphertext format: `v1.<keyId>.<iv>.<ciphertext+tag>` (base64url parts). The key id
 * allows rotation: the active (first) key encrypts, every listed key still decrypts.
 * Additional authenticated data binds a value to its row, so a ciphertext copied to
 * another row, column or organization fails to decrypt. Decryption fails closed.
 */
import { fromBase64Url, randomBytes, toBase64Url } from "./encoding";

/** Where a secret lives; the parts become the AES-GCM additional data. */
export interface SecretContext {
  orgId: string;
  table: string;
  column: string;
  rowId: string;
}

export class KeyringError extends Error {}

export interface Keyring {
  readonly activeKeyId: string;
  encrypt(plaintext: string, ctx: SecretContext): Promise<string>;
  decrypt(ciphertext: string, ctx: SecretContext): Promise<string>;
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;

/**
 * Parses `SECRET_KEYS`: comma-separated `keyId:base64url(32 bytes)` entries, the
 * active key first, e.g. `k2:…,k1:…` after rotating from k1 to k2.
 */
export function parseKeySpec(spec: string): Array<{ id: string; raw: Uint8Array<ArrayBuffer> }> {
  const entries = spec
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const sep = entry.indexOf(":");
      const id = entry.slice(0, sep);
      if (sep < 1 || !KEY_ID.test(id)) throw new KeyringError("SECRET_KEYS: each entry must be keyId:base64url-key");
      const raw = fromBase64Url(entry.slice(sep + 1));
      if (raw.length !== 32) throw new KeyringError(`SECRET_KEYS: key ${id} must be 32 bytes`);
      return { id, raw };
    });
  if (entries.length === 0) throw new KeyringError("SECRET_KEYS: at least one key is required");
  return entries;
}

export function generateKeySpec(id = `k${Date.now().toString(36)}`): string {
  return `${id}:${toBase64Url(randomBytes(32))}`;
}

function aad(ctx: SecretContext): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(JSON.stringify([ctx.orgId, ctx.table, ctx.column, ctx.rowId]));
}

export async function createKeyring(spec: string): Promise<Keyring> {
  const entries = parseKeySpec(spec);
  const keys = new Map<string, CryptoKey>();
  for (const { id, raw } of entries) {
    keys.set(id, await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]));
  }
  const activeKeyId = entries[0]!.id;
  return {
    activeKeyId,
    async encrypt(plaintext, ctx) {
      const iv = randomBytes(12);
      const sealed = await crypto.subtle.encrypt(
        { name: "AES-GCM", iv, additionalData: aad(ctx) },
        keys.get(activeKeyId)!,
        new TextEncoder().encode(plaintext),
      );
      return `v1.${activeKeyId}.${toBase64Url(iv)}.${toBase64Url(new Uint8Array(sealed))}`;
    },
    async decrypt(ciphertext, ctx) {
      const [version, keyId, iv, body] = ciphertext.split(".");
      const key = keyId ? keys.get(keyId) : undefined;
      if (version !== "v1" || !key || !iv || !body) throw new KeyringError("secret cannot be decrypted");
      try {
        const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64Url(iv), additionalData: aad(ctx) }, key, fromBase64Url(body));
        return new TextDecoder().decode(plain);
      } catch {
        throw new KeyringError("secret cannot be decrypted");
      }
    },
  };
}
