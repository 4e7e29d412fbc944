/** The Projects resource group. */
import { createRouter } from "../../shared/http/router";

export const projectsRouter = createRouter();
