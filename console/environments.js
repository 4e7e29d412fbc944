// @ts-check
/**
 * A project's environments (GET /api/projects/{id}/environments): production and its
 * previews with their branches, and a form creating a preview (POST …/environments
 * {name, branch}; the API's refusal shown at the field it names, e.g. a taken name).
 * `changed` tells the env-var editor to re-read its environment list.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, field, showProblem } from "./forms.js";

/**
 * @param {string} id
 * @param {boolean} canWrite
 * @param {() => void} changed
 */
export function environmentsSection(id, canWrite, changed) {
  const base = `/projects/${encodeURIComponent(id)}/environments`;
  const list = h("ul", { class: "environments" });
  const section = h("section", { "aria-labelledby": "environments-heading" }, h("h2", { id: "environments-heading" }, "Environments"), list);

  const load = async () => {
    const page = await api("GET", `${base}?limit=100`);
    list.replaceChildren(
      ...page.items.map(
        /** @param {{name: string, kind: string, branch: string | null}} e */ (e) =>
          h("li", {}, h("strong", {}, e.name), e.kind === "production" ? " (production)" : ` (preview of branch ${e.branch})`),
      ),
    );
  };

  const name = h("input", { name: "name", required: true, maxlength: 32, autocomplete: "off", pattern: "[a-z0-9]([a-z0-9-]*[a-z0-9])?" });
  const branch = h("input", { name: "branch", required: true, maxlength: 255, autocomplete: "off" });
  const saved = h("p", { role: "status", class: "saved" });
  const form = h(
    "form",
    { novalidate: true },
    h(
      "fieldset",
      { disabled: !canWrite, "aria-describedby": canWrite ? undefined : "read-only-note" },
      h("legend", {}, "New preview environment"),
      h("div", { class: "grid" }, field("Name", name, "1-32 lower-case letters, digits and '-'"), field("Branch", branch, "The git branch it previews")),
      h("button", { type: "submit" }, "Create environment"),
    ),
    saved,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    saved.textContent = "";
    try {
      await api("POST", base, { name: name.value.trim(), branch: branch.value.trim() });
      saved.textContent = `Environment ${name.value.trim()} created.`;
      name.value = "";
      branch.value = "";
      await load();
      changed();
    } catch (e) {
      showProblem(form, e);
    }
  });
  section.append(form);
  void load().catch((e) => showProblem(form, e));
  return section;
}
