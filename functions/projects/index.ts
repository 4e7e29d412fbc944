/**
 * The Projects resource group. Every per-project route looks the project up in
 * the caller's organization first, so a foreign, deleted or unknown id answers the
 * same 404. `/projects/home` is mounted before `/projects/{id}`.
 */
import { createRouter } from "../../shared/http/router";
import { cloneTokenRouter } from "./clone-token";
import { connectRouter } from "./connect";
import { deletionRouter } from "./deletion";
import { deploymentsRouter } from "./deployments";
import { domainsRouter } from "./domains";
import { envVarsRouter } from "./env-vars";
import { environmentsRouter } from "./environments";
import { exportRouter } from "./export";
import { folderRouter } from "./folder";
import { gitRouter } from "./git";
import { ensureRouter } from "./folder/ensure";
import { infoRouter } from "./info";
import { lifecycleRouter } from "./lifecycle";
import { optionsRouter } from "./options";
import { homeRouter } from "./home";
import { projectsCrudRouter } from "./projects";
import { resourcesRouter } from "./resources";

export const projectsRouter = createRouter()
  .route("/", folderRouter)
  .route("/", ensureRouter)
  .route("/", homeRouter)
  .route("/", projectsCrudRouter)
  .route("/", deletionRouter)
  .route("/", infoRouter)
  .route("/", environmentsRouter)
  .route("/", optionsRouter)
  .route("/", lifecycleRouter)
  .route("/", envVarsRouter)
  .route("/", cloneTokenRouter)
  .route("/", exportRouter)
  .route("/", resourcesRouter)
  .route("/", connectRouter)
  .route("/", domainsRouter)
  .route("/", deploymentsRouter)
  .route("/", gitRouter);
