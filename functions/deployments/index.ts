/** The deployments module: POST /api/deployments, POST /api/deployments/build/access and /api/deployments/:id (read, cancel, promote). */
import { createRouter } from "../../shared/http/router";
import { buildAccessRouter } from "./build-access";
import { deploymentRoutes } from "./routes";

export const deploymentsApiRouter = createRouter().route("/", buildAccessRouter).route("/", deploymentRoutes);
