// @ts-check
/**
 * The projects list: GET /api/projects/home (this instance's projects, and a linked cloud's), with
 * a "New project" link (#/projects/new) for roles with project:write.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";

/**
 * @typedef {{id: string, name: string, slug: string, status: string, statusReason: string | null, asleep: boolean, location: string,
 *   routes: {free: {hostname: string, state: string}, domains: {hostname: string, primary: boolean}[]}}} ProjectItem
 */

const PAGE = 50;

/** @param {string} status */
export const statusBadge = (status) => h("span", { class: `badge status-${status}` }, status.replace(/_/g, " "));

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 */
export async function projectsPage(main, ctx) {
  document.title = "Projects · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Projects");
  const status = h("p", { role: "status" }, "Loading projects…");
  // A deletion on the project page left its outcome here (console/project-delete.js).
  let deleted = null;
  try {
    deleted = sessionStorage.getItem("wsp.deletedProject");
    sessionStorage.removeItem("wsp.deletedProject");
  } catch {
    // Storage refused: no message to show.
  }
  const canCreate = ctx.can("project:write");
  const create = canCreate ? h("p", {}, h("a", { href: "#/projects/new", class: "button" }, "New project")) : null;
  main.replaceChildren(heading, create ?? "", deleted ? h("p", { role: "status", class: "saved" }, deleted) : "", status);
  if (!ctx.can("project:list")) {
    status.textContent = `Your role (${ctx.role ?? "none"}) in this organization cannot list projects (it needs project:list).`;
    return;
  }
  const body = h("tbody");
  const table = h(
    "table",
    {},
    h("caption", { class: "visually-hidden" }, "Projects of this organization"),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Location"))),
    body,
  );
  const more = h("button", { type: "button", class: "secondary" }, "Show more");
  more.hidden = true;
  const cloudNote = h("p", { class: "note" });
  cloudNote.hidden = true;

  /** @param {string | undefined} cursor */
  async function load(cursor) {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (cursor) query.set("cursor", cursor);
    try {
      const page = await api("GET", `/projects/home?${query}`);
      for (const p of /** @type {ProjectItem[]} */ (page.items)) body.append(row(p));
      more.hidden = !page.nextCursor;
      more.onclick = () => void load(page.nextCursor);
      if (page.cloud && !page.cloud.reachable) {
        cloudNote.textContent = `The linked cloud's projects are missing: ${page.cloud.reason ?? "the cloud could not be reached"}.`;
        cloudNote.hidden = false;
      }
      const count = body.children.length;
      status.textContent =
        count === 0
          ? canCreate
            ? "No projects yet. Create one with New project: upload a folder, or link a git repository."
            : "No projects yet. A member, admin or owner can create one."
          : `${count} project${count === 1 ? "" : "s"}${page.nextCursor ? " shown" : ""}.`;
    } catch (e) {
      status.textContent = explain(e);
      status.setAttribute("role", "alert");
    }
  }

  main.append(h("div", { class: "table-wrap" }, table), more, cloudNote);
  await load(undefined);
  table.hidden = body.children.length === 0;
}

/** @param {ProjectItem} p */
function row(p) {
  return h(
    "tr",
    {},
    h("th", { scope: "row" }, h("a", { href: `#/projects/${encodeURIComponent(p.id)}` }, p.name), h("span", { class: "sub" }, p.routes.free.hostname)),
    h("td", {}, statusBadge(p.status), p.asleep ? h("span", { class: "sub" }, "asleep") : null),
    h("td", {}, p.location),
  );
}
