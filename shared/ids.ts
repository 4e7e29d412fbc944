/**
 * Ids: `<prefix>_` + 10 chars of millisecond time + 16 random chars (Crockford
 * base32, 80 random bits). They sort by creation time, which gives lists a
 * stable order and a simple keyset cursor.
 */
import { randomBytes } from "./crypto/encoding";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export function newId(prefix: string, now = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let rand = "";
  for (const b of randomBytes(16)) rand += ALPHABET[b % 32];
  return `${prefix}_${time}${rand}`;
}
