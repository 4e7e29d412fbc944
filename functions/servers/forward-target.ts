/**
 * Where an edge forwards a request for an app running on a build server (issue 22,
 * item 5): the server's public URL and its edge key, decrypted with the keyring.
 * Runtime-neutral: the self-hosted edge (functions/self-hosted/edge/edge.ts) and the
 * Worker's edge (functions/worker-edge.ts) both use it. Read per server at most every
 * CACHE_MS per process (a changed publicUrl takes effect within that), so a busy app
 * costs no database read per request.
 *
 * A server that cannot be forwarded to says why, and the edge answers with that page:
 * no public URL (`server_no_url`, 503), no edge key (registered before forwarding
 * existed: `server_unkeyed`, 503), gone (`server_unreachable`, 502).
 */
import type { Keyring } from "../../shared/crypto/keyring";
import type { Db } from "../../shared/db/types";
import { forwardingServer } from "../self-hosted/edge/store";
import { edgeKeyContext } from "./store";

export type ForwardTarget = { origin: URL; edgeKey: string } | { refused: "server_no_url" | "server_unkeyed" | "server_unreachable" };

const CACHE_MS = 5_000;
const cache = new Map<string, { at: number; target: Promise<ForwardTarget> }>();

async function read(db: Db, keyring: Keyring, serverId: string): Promise<ForwardTarget> {
  const server = await forwardingServer(db, serverId);
  if (!server) return { refused: "server_unreachable" };
  if (!server.publicUrl) return { refused: "server_no_url" };
  if (!server.edgeKeyCiphertext) return { refused: "server_unkeyed" };
  const edgeKey = await keyring.decrypt(server.edgeKeyCiphertext, edgeKeyContext(server));
  return { origin: new URL(new URL(server.publicUrl).origin), edgeKey };
}

export function forwardTarget(db: Db, keyring: Keyring, serverId: string): Promise<ForwardTarget> {
  const now = performance.now();
  const hit = cache.get(serverId);
  if (hit && now - hit.at < CACHE_MS) return hit.target;
  if (cache.size > 1000) cache.clear();
  const target = read(db, keyring, serverId);
  cache.set(serverId, { at: now, target });
  // A failed read is not kept.
  target.catch(() => cache.delete(serverId));
  return target;
}
