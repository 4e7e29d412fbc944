/**
 * The logs module: build logs of a deployment, runtime and server logs of a project,
 * pages and Server-Sent-Event streams (store.ts: the one log store, retention;
 * writer.ts: the runner's batching writer; sweeper.ts: the retention loop).
 */
import { createRouter } from "../../shared/http/router";
import { buildLogsRouter } from "./build-logs";
import { runtimeLogsRouter } from "./runtime-logs";
import { serverLogsRouter } from "./server-logs";

export const logsRouter = createRouter().route("/", buildLogsRouter).route("/", runtimeLogsRouter).route("/", serverLogsRouter);
