/**
 * The edge benchmark's server process, started by bench/edge.ts over an IPC
 * channel (compiled like `npm start` does, then `node dist/bench/edge-server.mjs`), so the load generator
 * never shares this event loop: the real self-hosted server (startSelfHosted
 * with loadNodeConfig, as `npm start` runs it) on the Postgres database the
 * parent created, runner off, logs silent.
 *
 * Environment (set by the parent): BENCH_DB_URL, BENCH_DATA_DIR, BENCH_OWNER_TOKEN, and
 * BENCH_SERVER_ENV (optional: JSON of more configuration variables).
 *
 * IPC: sends {type:"ready", url}; answers {type:"reset"} and {type:"stats"} with
 * the process's CPU time and event-loop utilization since the last reset.
 * Exits on SIGTERM/SIGINT or when the parent goes away (which also lets
 * `--cpu-prof` write its profile).
 */
import { performance } from "node:perf_hooks";
import { loadNodeConfig } from "../functions/self-hosted/config";
import { startSelfHosted } from "../functions/self-hosted/start";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`bench/edge-server.ts: ${name} is not set`);
  return value;
}

async function main() {
  if (!process.send) throw new Error("bench/edge-server.ts must be started by bench/edge.ts (it needs an IPC channel)");
  const server = await startSelfHosted(
    loadNodeConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: env("BENCH_DATA_DIR"),
      DATABASE_URL: env("BENCH_DB_URL"),
      WORKSPACE_OWNER_TOKEN: env("BENCH_OWNER_TOKEN"),
      SHARED_DOMAIN: "apps.test",
      RUNNER: "off",
      LOG_LEVEL: "silent",
      // What a benchmark adds (bench/runners.ts: OUTBOUND_ALLOW_PRIVATE for its loopback build server).
      ...(JSON.parse(process.env.BENCH_SERVER_ENV ?? "{}") as Record<string, string>),
    }),
    () => {},
  );

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    const hardStop = setTimeout(() => process.exit(0), 15_000);
    hardStop.unref();
    await server.close().catch((e) => console.error("bench/edge-server.ts: close failed:", e));
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
  process.on("disconnect", () => void stop());

  let since = { cpu: process.cpuUsage(), elu: performance.eventLoopUtilization(), at: performance.now() };
  process.on("message", (msg: { type?: string }) => {
    if (msg?.type === "reset") {
      since = { cpu: process.cpuUsage(), elu: performance.eventLoopUtilization(), at: performance.now() };
      process.send!({ type: "reset-done" });
    } else if (msg?.type === "stats") {
      const cpu = process.cpuUsage(since.cpu);
      process.send!({
        type: "stats",
        wallMs: performance.now() - since.at,
        cpuMs: (cpu.user + cpu.system) / 1000,
        eventLoopUtilization: performance.eventLoopUtilization(since.elu).utilization,
      });
    }
  });

  process.send({ type: "ready", url: server.url });
}

main().catch((e) => {
  console.error("bench/edge-server.ts:", e instanceof Error ? (e.stack ?? e.message) : e);
  process.exit(1);
});
