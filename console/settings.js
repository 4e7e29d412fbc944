// @ts-check
/** The Settings page (being built: the API reference covers it until then). */
import { comingNextPage } from "./placeholder.js";

/** @param {HTMLElement} main @param {import("./app.js").Ctx} _ctx */
export async function settingsPage(main, _ctx) {
  comingNextPage(main, "Settings");
}
