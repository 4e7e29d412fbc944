/** Build servers (issue 22): their management routes and the runner protocol their runners call. */
export { serversRouter } from "./routes";
export { runnerProtocolRouter } from "./runner-protocol";
export { runnerJobsRouter } from "./runner-jobs";
export { runnerStateRouter } from "./runner-state";
