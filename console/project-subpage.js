// @ts-check
/**
 * The frame every sub-page of a project shares (Deployments, HTTP requests, Route rules): the
 * back link to the project, the h1 and a loading line at once, then the project read
 * (GET /api/projects/{id}), after which the heading, the title and the back link name it. A
 * project that is not the organization's, or a failed read, is shown in place.
 */
import { api, ApiError } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";

/**
 * @param {HTMLElement} main
 * @param {string} projectId
 * @param {string} title the page's name, e.g. "Deployments"
 */
export function projectSubpage(main, projectId, title) {
  document.title = `${title} · Workspace`;
  const base = `/projects/${encodeURIComponent(projectId)}`;
  const heading = h("h1", { tabindex: "-1" }, title);
  const back = h("p", {}, h("a", { href: `#${base}` }, "← Project"));
  main.replaceChildren(back, heading, h("p", { role: "status" }, "Loading…"));
  return {
    base,
    heading,
    back,
    /** The project, named on the page; undefined once the reason it could not be read is shown. @returns {Promise<any>} */
    async load() {
      let project;
      try {
        project = await api("GET", base);
      } catch (e) {
        const missing = e instanceof ApiError && e.status === 404;
        heading.textContent = missing ? "Project not found" : title;
        main.replaceChildren(back, heading, h("p", { role: "alert" }, missing ? "No project with this id in the selected organization." : explain(e)));
        return undefined;
      }
      document.title = `${title} of ${project.name} · Workspace`;
      heading.textContent = `${title} of ${project.name}`;
      /** @type {HTMLAnchorElement} */ (back.firstChild).textContent = `← ${project.name}`;
      return project;
    },
  };
}
