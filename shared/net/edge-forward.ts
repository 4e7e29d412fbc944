/**
 * Signed forwarding to a build server's edge (issue 22, item 5). The edge that
 * first receives a request for an app running on a server (the Worker, or a
 * self-hosted instance's edge) forwards it to the server's `publicUrl` with the
 * original Host, the client address and the deployment in headers, signed with
 * HMAC-SHA256 under the server's edge key; the server's edge
 * (functions/servers/server-edge.ts) serves only requests whose signature
 * verifies, so nobody can reach an app on a server around the route rules and
 * logs of the edge that forwards, or claim another client address.
 *
 * The key: edgeKey = HMAC-SHA256(runnerToken, "wsp edge forward v1"). The
 * control plane derives it when the server is registered (the only time it
 * sees the token) and stores it encrypted with the keyring; the runner derives
 * the same from its token. The key never travels.
 *
 * What is signed, as one canonical string: the version tag, then each field as
 * `<length>:<value>` (length in UTF-16 code units, the fields' own text), in a
 * fixed order: method, target (path and query as sent), original Host, client
 * address, protocol the client used, deployment id, timestamp (Unix seconds).
 * Length prefixes leave no ambiguity whatever a field contains. A signature is
 * accepted within ±MAX_SKEW_SECONDS of the verifier's clock (a replay is only
 * possible within that window, and only of the same method, target and host).
 * Verification is WebCrypto's `verify` (constant time). WebCrypto only: this
 * runs in workerd and Node alike.
 */
import { fromBase64Url, toBase64Url } from "../crypto/encoding";

export const EDGE_KEY_INFO = "wsp edge forward v1";
/** How far the signer's clock may be from the verifier's. */
export const MAX_SKEW_SECONDS = 30;

/** The signed headers. A client's own copies are stripped by every edge before anything is forwarded or proxied. */
export const FORWARD_HEADERS = {
  host: "x-wsp-forwarded-host",
  client: "x-wsp-client-address",
  proto: "x-wsp-forwarded-proto",
  deployment: "x-wsp-deployment",
  at: "x-wsp-forwarded-at",
  signature: "x-wsp-signature",
} as const;
export const FORWARD_HEADER_NAMES: ReadonlySet<string> = new Set(Object.values(FORWARD_HEADERS));

export interface ForwardFields {
  method: string;
  /** The request target as sent to the server's edge: path and query. */
  target: string;
  /** The Host the client sent to the forwarding edge. */
  host: string;
  clientAddress: string;
  proto: "http" | "https";
  deploymentId: string;
}

export type VerifyResult = { ok: true; fields: ForwardFields } | { ok: false; reason: "unsigned" | "malformed" | "expired" | "bad_signature" };

const encoder = new TextEncoder();

/** The server's edge key from its runner token (base64url of 32 bytes): what registration stores and the runner derives. */
export async function deriveEdgeKey(runnerToken: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(runnerToken), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return toBase64Url(new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(EDGE_KEY_INFO))));
}

// Imported keys, per key text (a handful of servers per process).
const imported = new Map<string, Promise<CryptoKey>>();
function hmacKey(edgeKey: string): Promise<CryptoKey> {
  let key = imported.get(edgeKey);
  if (!key) {
    if (imported.size > 1000) imported.clear();
    key = crypto.subtle.importKey("raw", fromBase64Url(edgeKey), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    imported.set(edgeKey, key);
  }
  return key;
}

/** The canonical string: version, then `<length>:<value>` per field, in a fixed order. */
export function canonicalForward(f: ForwardFields, at: number): string {
  const parts = [f.method, f.target, f.host, f.clientAddress, f.proto, f.deploymentId, String(at)];
  return `${EDGE_KEY_INFO}\n${parts.map((p) => `${p.length}:${p}`).join("\n")}`;
}

/** The headers to add to a forwarded request (after stripping the client's copies). */
export async function signForward(edgeKey: string, f: ForwardFields, now: Date): Promise<Record<string, string>> {
  const at = Math.floor(now.getTime() / 1000);
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(edgeKey), encoder.encode(canonicalForward(f, at)));
  return {
    [FORWARD_HEADERS.host]: f.host,
    [FORWARD_HEADERS.client]: f.clientAddress,
    [FORWARD_HEADERS.proto]: f.proto,
    [FORWARD_HEADERS.deployment]: f.deploymentId,
    [FORWARD_HEADERS.at]: String(at),
    [FORWARD_HEADERS.signature]: toBase64Url(new Uint8Array(mac)),
  };
}

const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;
const SECONDS = /^[0-9]{1,12}$/;

/**
 * Checks a forwarded request: `header(name)` reads one header of it (undefined when absent
 * or repeated). The method and target are the ones the server's edge received.
 */
export async function verifyForward(
  edgeKey: string,
  request: { method: string; target: string; header(name: string): string | undefined },
  now: Date,
): Promise<VerifyResult> {
  const signature = request.header(FORWARD_HEADERS.signature);
  if (signature === undefined) return { ok: false, reason: "unsigned" };
  const host = request.header(FORWARD_HEADERS.host);
  const clientAddress = request.header(FORWARD_HEADERS.client);
  const proto = request.header(FORWARD_HEADERS.proto);
  const deploymentId = request.header(FORWARD_HEADERS.deployment);
  const atText = request.header(FORWARD_HEADERS.at);
  if (!host || !clientAddress || !deploymentId || !atText || (proto !== "http" && proto !== "https")) return { ok: false, reason: "malformed" };
  if (!SIGNATURE.test(signature) || !SECONDS.test(atText)) return { ok: false, reason: "malformed" };
  const at = Number(atText);
  if (Math.abs(now.getTime() / 1000 - at) > MAX_SKEW_SECONDS) return { ok: false, reason: "expired" };
  const fields: ForwardFields = { method: request.method, target: request.target, host, clientAddress, proto, deploymentId };
  const valid = await crypto.subtle.verify("HMAC", await hmacKey(edgeKey), fromBase64Url(signature), encoder.encode(canonicalForward(fields, at)));
  return valid ? { ok: true, fields } : { ok: false, reason: "bad_signature" };
}
