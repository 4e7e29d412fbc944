/** The Settings resource group: the caller's workspace settings. */
import { createRouter } from "../../shared/http/router";
import { workspaceSettingsRouter } from "./settings";

export const settingsRouter = createRouter().route("/", workspaceSettingsRouter);
