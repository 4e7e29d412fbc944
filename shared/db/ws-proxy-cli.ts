/** `npm run dev:proxy`: the local Neon stand-in for `npm run dev:worker`. */
import { startWsProxy } from "./ws-proxy";

const port = Number(process.env.WS_PROXY_PORT ?? 5433);
const proxy = await startWsProxy(port);
console.log(`Neon WebSocket proxy listening on ${proxy.url} (loopback Postgres only)`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void proxy.close().then(() => process.exit(0)));
