// @ts-check
/** A project's deployments with live build and runtime logs (being built: the API reference covers it until then). */
import { comingNextPage } from "./placeholder.js";

/** @param {HTMLElement} main @param {import("./app.js").Ctx} _ctx @param {string} _projectId */
export async function deploymentsPage(main, _ctx, _projectId) {
  comingNextPage(main, "Deployments");
}
