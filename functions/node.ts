/**
 * Self-hosted entry: the shared routers on Node, PGlite by default. `npm start`
 * runs it compiled (functions/start.mjs), as the process npm starts, so SIGTERM
 * from a process manager reaches the server itself.
 */
import { loadNodeConfig } from "./self-hosted/config";
import { startSelfHosted, type RunningServer } from "./self-hosted/start";

let server: RunningServer | undefined;
let stopping: string | undefined;

const shutDown = (running: RunningServer) =>
  running.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );

function stop(signal: string) {
  if (stopping) return;
  stopping = signal;
  console.log(`${signal}: shutting down`);
  // A signal during start-up is acted on once start-up has finished (or failed).
  if (server) void shutDown(server);
}

// Installed before start-up, so a signal then does not kill the process with the data-dir lock held.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => stop(signal));

try {
  // 0: the "ready in" time counts from the process's start, compiling or loading the code included.
  server = await startSelfHosted(loadNodeConfig(process.env), console.log, 0);
  if (stopping) void shutDown(server);
} catch (e) {
  console.error(e instanceof Error ? e.message : e);
  process.exit(stopping ? 0 : 1);
}
