/**
 * Cloud entry: the Cloudflare Worker. Postgres through the Neon serverless
 * driver, one WebSocket Pool per request, ended with `waitUntil`.
 *
 * Bindings: DATABASE_URL and SECRET_KEYS (secrets); NEON_WS_PROXY only for local
 * development and tests, where a WebSocket-to-TCP proxy stands in for Neon's.
 */
import type { Context } from "hono";
import { z } from "zod";
import { createKeyring, type Keyring } from "../shared/crypto/keyring";
import { openNeon, useLocalWsProxy } from "../shared/db/neon";
import type { AppEnv, RequestServices } from "../shared/http/context";
import { createApp } from "./app";

const Bindings = z.object({
  DATABASE_URL: z.string().min(1),
  SECRET_KEYS: z.string().min(1),
  NEON_WS_PROXY: z.string().optional(),
  SHARED_DOMAIN: z.string().min(1),
});

// Parsed once per isolate and per distinct binding value.
let keyringCache: { spec: string; keyring: Promise<Keyring> } | undefined;
function keyringFor(spec: string): Promise<Keyring> {
  if (keyringCache?.spec !== spec) keyringCache = { spec, keyring: createKeyring(spec) };
  return keyringCache.keyring;
}

async function services(c: Context<AppEnv>): Promise<RequestServices> {
  const parsed = Bindings.safeParse(c.env);
  if (!parsed.success) throw new Error(`Worker misconfigured: ${parsed.error.issues[0]!.path.join(".")} is missing`);
  const env = parsed.data;
  if (env.NEON_WS_PROXY) useLocalWsProxy(env.NEON_WS_PROXY);
  const { db, close } = openNeon(env.DATABASE_URL);
  return {
    db,
    keyring: await keyringFor(env.SECRET_KEYS),
    config: { mode: "cloud", sharedDomain: env.SHARED_DOMAIN },
    release: async () => c.executionCtx.waitUntil(close()),
  };
}

const app = createApp({ services });

export default {
  fetch: app.fetch,
};
