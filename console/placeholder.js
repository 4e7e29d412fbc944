// @ts-check
/** Pages of later increments: a heading and a note, so the navigation is complete today. */
import { h } from "./dom.js";

/** @param {HTMLElement} main @param {string} title */
export function comingNextPage(main, title) {
  document.title = `${title} · Workspace`;
  main.replaceChildren(
    h("h1", { tabindex: "-1" }, title),
    h("p", {}, `${title} in the console are coming next. Until then, use the API (`, h("a", { href: "/api/docs" }, "reference"), ")."),
  );
}
