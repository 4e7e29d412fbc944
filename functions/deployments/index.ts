/** The deployments module: POST /api/deployments and /api/deployments/:id (read, cancel, promote). */
export { deploymentsApiRouter } from "./routes";
