/** Git hooks: the public push webhook git hosts call (the hook itself is created by the project's auto-deploy route). */
import { createRouter } from "../../shared/http/router";
import { pushRouter } from "./push";

export const gitHooksRouter = createRouter().route("/", pushRouter);
