// @ts-check
/**
 * Env vars of one environment, edited through the merge PATCH /api/projects/{id}/env: only
 * what changed is sent (a changed value, a new key, a deletion). A secret reads as the mask;
 * left alone it is not sent at all, so the stored secret stays as it is. Making a secret plain
 * needs its value typed again (the stored one is never shown).
 *
 * A deployment keeps the variables, resources and options it was queued with, so a saved change
 * reaches the app only with a new deployment: next to the save, the environment's `needsRedeploy`
 * (GET /api/projects/{id}/environments) says so, with what differs and a link to deploy.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, showFieldError, showProblem } from "./forms.js";

/** Eight U+2022 bullets: how the API shows every secret value. */
export const MASK = "\u2022".repeat(8);
const KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** @typedef {{key: string, value: string, isSecret: boolean}} EnvVar */
/**
 * @typedef {{original?: EnvVar, key: HTMLInputElement | null, value: HTMLInputElement, secret: HTMLInputElement,
 *   remove: HTMLButtonElement, element: HTMLElement, deleted: boolean}} Row
 */

/**
 * @param {string} id
 * @param {boolean} canWrite
 */
export async function envVarsSection(id, canWrite) {
  const base = `/projects/${encodeURIComponent(id)}`;
  const environment = h("select", { id: "env-environment", name: "environment" });
  const list = h("div", { class: "env-list" });
  const saved = h("p", { role: "status", class: "saved" });
  const redeploy = h("p", { class: "note redeploy", role: "status", hidden: true });
  /** @type {Map<string, {needsRedeploy: boolean, changes: string[]}>} */
  let states = new Map();
  const add = h("button", { type: "button", class: "secondary" }, "Add variable");
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "env-heading" },
    h(
      "fieldset",
      { disabled: !canWrite, "aria-describedby": canWrite ? undefined : "read-only-note" },
      h("legend", { class: "visually-hidden" }, "Variables"),
      list,
      h("div", { class: "actions" }, add, h("button", { type: "submit" }, "Save variables")),
    ),
    saved,
    redeploy,
  );
  const section = h(
    "section",
    { "aria-labelledby": "env-heading" },
    h("h2", { id: "env-heading" }, "Environment variables"),
    h("div", { class: "field inline" }, h("label", { for: "env-environment" }, "Environment"), environment),
    form,
  );

  /** @type {Row[]} */
  let rows = [];

  /** @param {EnvVar | undefined} v */
  const addRow = (v) => {
    const value = h("input", {
      type: v?.isSecret ? "password" : "text",
      name: "value",
      autocomplete: "off",
      spellcheck: "false",
      value: v ? v.value : "",
      "aria-label": v ? `Value of ${v.key}` : "Value of the new variable",
      // The mask is selected on focus, so typing replaces it rather than appending to it.
      onfocus: () => value.value === MASK && value.select(),
    });
    const key = v
      ? null
      : h("input", { type: "text", name: "key", autocomplete: "off", spellcheck: "false", "aria-label": "Name of the new variable", placeholder: "NAME" });
    const secret = h("input", {
      type: "checkbox",
      name: "secret",
      checked: v?.isSecret ?? false,
      "aria-label": v ? `${v.key} is secret` : "The new variable is secret",
    });
    const remove = h("button", { type: "button", class: "secondary small", "aria-pressed": v ? "false" : undefined }, v ? `Delete ${v.key}` : "Remove");
    const element = h(
      "div",
      { class: "env-row" },
      v ? h("span", { class: "env-key" }, v.key) : key,
      value,
      h("label", { class: "check" }, secret, " Secret"),
      remove,
    );
    /** @type {Row} */
    const row = { original: v, key, value, secret, remove, element, deleted: false };
    remove.addEventListener("click", () => {
      if (!v) {
        rows = rows.filter((r) => r !== row);
        element.remove();
        add.focus();
        return;
      }
      row.deleted = !row.deleted;
      remove.setAttribute("aria-pressed", String(row.deleted));
      element.classList.toggle("deleted", row.deleted);
      value.disabled = row.deleted;
      secret.disabled = row.deleted;
    });
    rows.push(row);
    list.append(element);
    return row;
  };

  const load = async () => {
    list.replaceChildren(h("p", { class: "sub" }, "Loading variables…"));
    rows = [];
    /** @type {EnvVar[]} */
    const vars = [];
    let cursor = null;
    // Every page (100 a page): the editor shows the whole environment.
    do {
      const query = new URLSearchParams({ environment: environment.value || "production", limit: "100" });
      if (cursor) query.set("cursor", cursor);
      const page = await api("GET", `${base}/env?${query}`);
      vars.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    list.replaceChildren();
    if (vars.length === 0) list.append(h("p", { class: "sub empty" }, "No variables in this environment."));
    for (const v of vars) addRow(v);
  };

  add.addEventListener("click", () => {
    list.querySelector(".empty")?.remove();
    addRow(undefined).key?.focus();
  });

  /** What the chosen environment's current deployment lacks of the live configuration, if anything. */
  const showRedeploy = () => {
    const name = environment.value || "production";
    const state = states.get(name);
    redeploy.hidden = !state?.needsRedeploy;
    if (!state?.needsRedeploy) return redeploy.replaceChildren();
    redeploy.replaceChildren(
      h("strong", {}, "Redeploy needed: "),
      `the current deployment of ${name} runs older ${state.changes.join(", ")}. A deployment keeps what it was deployed with (a rollback restores it); `,
      h("a", { href: `#/projects/${encodeURIComponent(id)}/deployments` }, "deploy again"),
      " to apply the changes.",
    );
  };

  environment.addEventListener("change", () => {
    saved.textContent = "";
    showRedeploy();
    clearErrors(form);
    void load().catch((e) => showProblem(form, e));
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    saved.textContent = "";
    /** @type {{key: string, value: string, isSecret: boolean}[]} */
    const upserts = [];
    /** @type {string[]} */
    const deletes = [];
    /** @type {Record<string, HTMLElement>} */
    const fields = {};
    let invalid = false;
    /** @param {HTMLElement} el @param {string} message */
    const reject = (el, message) => {
      showFieldError(el, message);
      if (!invalid) el.focus();
      invalid = true;
    };
    const taken = new Set(rows.filter((r) => r.original).map((r) => r.original?.key));
    for (const row of rows) {
      const o = row.original;
      if (o && row.deleted) {
        fields[`deletes.${deletes.length}`] = row.remove;
        deletes.push(o.key);
        continue;
      }
      const isSecret = row.secret.checked;
      if (o) {
        if (row.value.value === o.value && isSecret === o.isSecret) continue;
        // A secret turned plain without a new value: its stored value is unknown here.
        if (o.isSecret && !isSecret && row.value.value === MASK) {
          reject(row.value, `Type the value of ${o.key} again to make it plain; the stored secret is never shown.`);
          continue;
        }
        // A plain variable turned secret keeps its value; a secret left as the mask keeps the stored one.
        fields[`upserts.${upserts.length}.value`] = row.value;
        fields[`upserts.${upserts.length}.key`] = row.value;
        upserts.push({ key: o.key, value: row.value.value, isSecret });
        continue;
      }
      const key = /** @type {HTMLInputElement} */ (row.key).value.trim();
      if (!key && !row.value.value) continue;
      if (!KEY_PATTERN.test(key)) {
        reject(/** @type {HTMLInputElement} */ (row.key), "A name is letters, digits and _, not starting with a digit.");
        continue;
      }
      if (taken.has(key)) {
        reject(/** @type {HTMLInputElement} */ (row.key), `${key} is already set in this environment: edit it above.`);
        continue;
      }
      taken.add(key);
      fields[`upserts.${upserts.length}.key`] = /** @type {HTMLInputElement} */ (row.key);
      fields[`upserts.${upserts.length}.value`] = row.value;
      upserts.push({ key, value: row.value.value, isSecret });
    }
    if (invalid) return;
    if (upserts.length === 0 && deletes.length === 0) {
      saved.textContent = "No changes to save.";
      return;
    }
    try {
      const result = await api("PATCH", `${base}/env`, { environment: environment.value || "production", upserts, deletes });
      await load();
      saved.textContent = `Saved: ${result.upserted.length} set, ${result.deleted.length} deleted.`;
      await readEnvironments();
    } catch (e) {
      showProblem(form, e, fields);
    }
  });

  const readEnvironments = async () => {
    const chosen = environment.value;
    const envs = await api("GET", `${base}/environments?limit=100`);
    environment.replaceChildren(
      ...envs.items.map(
        /** @param {{name: string, kind: string}} e */ (e) => h("option", { value: e.name }, e.kind === "production" ? `${e.name} (production)` : e.name),
      ),
    );
    if (chosen) environment.value = chosen;
    states = new Map(
      envs.items.map(
        /** @param {{name: string, needsRedeploy: boolean, changes: string[]}} e */ (e) => [e.name, { needsRedeploy: e.needsRedeploy, changes: e.changes }],
      ),
    );
    showRedeploy();
  };
  // The environments section dispatches this after creating one: the picker offers it at once.
  section.addEventListener("environments-changed", () => void readEnvironments().catch((e) => showProblem(form, e)));

  try {
    await readEnvironments();
    await load();
  } catch (e) {
    showProblem(form, e);
  }
  return section;
}
