/**
 * What start.ts needs only once the database is open: the app (every router),
 * the Node services (runner, edge, relay, delivery), metrics, the console and
 * scheduled backups. start.ts imports this module dynamically at its first line,
 * so its loading (most of the server's code: a separate chunk of the bundle) runs
 * on the main thread while the embedded database opens on its worker thread.
 */
export { createApp } from "../app";
export { startScheduledBackups } from "../operations/backup/schedule";
export { createMetrics } from "../operations/metrics/metrics";
export { countRequest } from "../operations/metrics/http-requests";
export { mountMetricsRoute } from "../operations/metrics/route";
export { mountConsole } from "./console";
export { createNodeServices } from "./services";
