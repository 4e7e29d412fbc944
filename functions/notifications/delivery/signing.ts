/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): the signed
 * content is `${webhook-id}.${webhook-timestamp}.${body}`, HMAC-SHA256 with the
 * base64-decoded part of the `whsec_` secret, sent as `webhook-signature: v1,<base64>`.
 * WebCrypto: the same code on Workers and Node.
 */
import { fromBase64Url, toBase64Url } from "../../../shared/crypto/encoding";

/** Standard (padded) base64. */
export const toBase64 = (bytes: Uint8Array): string => {
  const url = toBase64Url(bytes).replace(/-/g, "+").replace(/_/g, "/");
  return url + "=".repeat((4 - (url.length % 4)) % 4);
};

export const fromBase64 = (text: string): Uint8Array<ArrayBuffer> => {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new Error("not base64");
  return fromBase64Url(text.replace(/=+$/, ""));
};

export async function signWebhook(secret: string, id: string, timestamp: number, body: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", fromBase64(secret.replace(/^whsec_/, "")), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${id}.${timestamp}.${body}`));
  return `v1,${toBase64(new Uint8Array(mac))}`;
}

/** The three Standard Webhooks headers for one attempt (the timestamp is the attempt's). */
export async function webhookHeaders(secret: string, id: string, now: Date, body: string): Promise<Record<string, string>> {
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": await signWebhook(secret, id, timestamp, body),
  };
}
