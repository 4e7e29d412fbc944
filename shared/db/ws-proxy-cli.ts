/**
 * `npm run dev:proxy`: the local Neon stand-in for `npm run dev:worker`.
 * Forwards only to the database named by `--target host:port`, else by DATABASE_URL.
 */
import { parseArgs } from "node:util";
import { databaseTarget, parseTarget, startWsProxy, type ProxyTarget } from "./ws-proxy";

const { values } = parseArgs({ options: { target: { type: "string" } } });

function configuredTarget(): ProxyTarget {
  if (values.target !== undefined) {
    const target = parseTarget(values.target);
    if (!target) throw new Error(`--target must be host:port, got "${values.target}"`);
    return target;
  }
  if (process.env.DATABASE_URL) return databaseTarget(process.env.DATABASE_URL);
  throw new Error("Name the database to forward to: set DATABASE_URL or pass --target host:port");
}

let target: ProxyTarget;
try {
  target = configuredTarget();
} catch (error) {
  console.error((error as Error).message);
  process.exit(1);
}
const port = Number(process.env.WS_PROXY_PORT ?? 5433);
const proxy = await startWsProxy({ target, port });
console.log(`Neon WebSocket proxy listening on ${proxy.url} -> ${target.host}:${target.port} (browser pages from other origins refused)`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void proxy.close().then(() => process.exit(0)));
