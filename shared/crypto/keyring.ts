/**
 * Secrets at rest: AES-256-GCM through node:crypto, the same code on Workers (nodejs_compat) and Node.
 * node:crypto rather than WebCrypto: its cipher runs synchronously, where every WebCrypto call is a job queued to
 * another thread and a promise (~70 µs a decrypt in the notification fan-out bench, a sixth of a webhook send's
 * CPU); the bytes are the same (ciphertext then the 16-byte tag), so either reads the other's values.
 *
 * Ciphertext format: `v1.<keyId>.<iv>.<ciphertext+tag>` (base64url parts). The key id
 * allows rotation: the active (first) key encrypts, every listed key still decrypts.
 * Additional authenticated data binds a value to its row, so a ciphertext copied to
 * another row, column or organization fails to decrypt. Decryption fails closed.
 */
import { createCipheriv, createDecipheriv, createSecretKey } from "node:crypto";
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

/** AES-GCM's authentication tag, appended to the ciphertext. */
const TAG_BYTES = 16;

export async function createKeyring(spec: string): Promise<Keyring> {
  // Key objects made once: given raw bytes, every cipher would build its own (~20 µs a call, measured).
  const keys = new Map(parseKeySpec(spec).map(({ id, raw }) => [id, createSecretKey(raw)]));
  const activeKeyId = keys.keys().next().value!;
  return {
    activeKeyId,
    async encrypt(plaintext, ctx) {
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", keys.get(activeKeyId)!, iv);
      cipher.setAAD(aad(ctx));
      const sealed = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
      return `v1.${activeKeyId}.${toBase64Url(iv)}.${toBase64Url(sealed)}`;
    },
    async decrypt(ciphertext, ctx) {
      const [version, keyId, iv, body] = ciphertext.split(".");
      const key = keyId ? keys.get(keyId) : undefined;
      if (version !== "v1" || !key || !iv || !body) throw new KeyringError("secret cannot be decrypted");
      try {
        const sealed = fromBase64Url(body);
        if (sealed.length < TAG_BYTES) throw new KeyringError("secret cannot be decrypted");
        const decipher = createDecipheriv("aes-256-gcm", key, fromBase64Url(iv));
        decipher.setAAD(aad(ctx));
        decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
        return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]).toString("utf8");
      } catch {
        throw new KeyringError("secret cannot be decrypted");
      }
    },
  };
}
