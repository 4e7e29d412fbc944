// @ts-check
/**
 * Deleting a project, for `project:admin`: the deletion preview (GET /api/projects/{id}/deletion-preview)
 * says what goes, the project's name typed confirms, then DELETE /api/projects/{id} and back to
 * #/projects with the outcome. Without `project:admin` the section says who can delete it.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showFormError } from "./forms.js";

/** The preview's kinds, in words. @type {[string, string, string][]} */
const KINDS = [
  ["environments", "environment", "environments"],
  ["envVars", "environment variable", "environment variables"],
  ["domains", "custom domain", "custom domains"],
  ["deployments", "deployment record", "deployment records"],
  ["services", "compose service", "compose services"],
  ["cloneTokens", "clone token", "clone tokens"],
  ["deploymentSessions", "deployment-session token", "deployment-session tokens"],
];

/** The outcome shown on the projects page after a deletion (read once by projects.js). */
export const DELETED_KEY = "wsp.deletedProject";

/**
 * @param {{id: string, name: string}} project
 * @param {import("./app.js").Ctx} ctx
 */
export function deleteSection(project, ctx) {
  const section = h("section", { "aria-labelledby": "delete-heading" }, h("h2", { id: "delete-heading" }, "Delete the project"));
  if (!ctx.can("project:admin")) {
    section.append(h("p", { class: "note" }, `Your role (${ctx.role ?? "none"}) does not include project:admin: an owner or admin can delete this project.`));
    return section;
  }
  const base = `/projects/${encodeURIComponent(project.id)}`;
  const start = h("button", { type: "button", class: "secondary" }, "Delete project…");
  const area = h("div", {});
  section.append(h("p", { class: "sub" }, "Removes the project and everything it owns, at once and for good."), start, area);

  start.addEventListener("click", async () => {
    start.disabled = true;
    area.replaceChildren(h("p", { role: "status" }, "Reading what would be removed…"));
    let preview;
    try {
      preview = await api("GET", `${base}/deletion-preview`);
    } catch (e) {
      area.replaceChildren(h("p", { role: "alert" }, explain(e)));
      start.disabled = false;
      return;
    }
    /** @type {Record<string, number>} */
    const removes = preview.removes;
    const listed = KINDS.map(([key, one, many]) => {
      const n = removes[key] ?? 0;
      return h("li", {}, `${n} ${n === 1 ? one : many}`);
    });
    const name = h("input", { type: "text", name: "confirmName", autocomplete: "off", spellcheck: "false" });
    const confirm = h("button", { type: "submit" }, "Delete ", project.name, " now");
    const cancel = h("button", { type: "button", class: "secondary" }, "Keep the project");
    const form = h(
      "form",
      { novalidate: true, "aria-labelledby": "delete-preview-heading" },
      h("h3", { id: "delete-preview-heading", tabindex: "-1" }, "Deleting removes"),
      h("ul", { class: "deletion-preview" }, h("li", {}, `the project ${project.name}`), listed),
      field(`Type the project's name (${project.name}) to confirm`, name),
      h("div", { class: "actions" }, confirm, cancel),
    );
    area.replaceChildren(form);
    name.focus();
    cancel.addEventListener("click", () => {
      area.replaceChildren();
      start.disabled = false;
      start.focus();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      if (name.value.trim() !== project.name) {
        showFormError(form, `Type ${project.name} exactly to delete it.`);
        name.focus();
        return;
      }
      confirm.disabled = true;
      try {
        await api("DELETE", base);
        try {
          sessionStorage.setItem(DELETED_KEY, `The project ${project.name} was deleted.`);
        } catch {
          // Storage refused: the projects list shows without the message.
        }
        location.hash = "#/projects";
      } catch (e) {
        confirm.disabled = false;
        showFormError(form, explain(e));
      }
    });
  });
  return section;
}
