/**
 * The folder-upload flow on both runtimes: session, scan and ensure. The relay route is self-hosted only: functions/self-hosted/uploads/.
 */
import { createRouter } from "../../../shared/http/router";
import { scanRouter } from "./scan";
import { sessionRouter } from "./session";

export const folderRouter = createRouter().route("/", sessionRouter).route("/", scanRouter);
