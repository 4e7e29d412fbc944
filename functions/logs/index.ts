/**
 * The logs module: build logs of a deployment, runtime and server logs of a project,
 * pages and Server-Sent-Event streams (store.ts: build and runtime lines, a row each;
 * request-batches.ts, request-lines.ts, request-store.ts: the edge's request lines, a
 * row per batch; writer.ts: the batching writers of both; retention is
 * functions/operations/retention/).
 */
import { createRouter } from "../../shared/http/router";
import { buildLogsRouter } from "./build-logs";
import { runtimeLogsRouter } from "./runtime-logs";
import { serverLogsRouter } from "./server-logs";

export const logsRouter = createRouter().route("/", buildLogsRouter).route("/", runtimeLogsRouter).route("/", serverLogsRouter);
