/**
 * Ids: `<prefix>_` + 10 chars of millisecond time + 16 random chars (Crockford
 * base32, 80 random bits). They sort by creation time, which gives lists a
 * stable order and a simple keyset cursor.
 */
import { randomText } from "./crypto/encoding";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

// The time part of the last id: ids made in the same millisecond (most, under load) share it.
let lastNow = -1;
let lastTime = "";

function timePart(now: number): string {
  if (now === lastNow) return lastTime;
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  lastNow = now;
  lastTime = time;
  return time;
}

export function newId(prefix: string, now = Date.now()): string {
  return `${prefix}_${timePart(now)}${randomText(16, ALPHABET)}`;
}
