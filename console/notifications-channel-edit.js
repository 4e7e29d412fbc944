// @ts-check
/**
 * Editing one channel: its name and its destination (the kind's config fields) through
 * PATCH /api/notifications/channels/{id}, sending only what changed. The API never shows a
 * secret back (a webhook's signing secret, a chat webhook URL), so such a field starts empty
 * and left empty keeps the stored value: a chat URL is then not sent at all, and a webhook
 * config goes without `signingSecret`, which the API reads as "keep". A changed destination
 * leaves the channel unverified (the API resets it); the message after saving says so.
 */
import { api } from "./api.js";
import { h, uid } from "./dom.js";
import { clearErrors, field, showProblem } from "./forms.js";

/** @typedef {import("./notifications-data.js").Channel} Channel */
/** @typedef {{name: string, label: string, hint: string, type: string, optional?: boolean}} KindField */

/**
 * @param {Channel} c
 * @param {KindField[]} kindFields the create form's fields of `c.kind`
 * @param {{saved: (updated: Channel, message: string) => Promise<void>, close: () => void}} hooks
 */
export function editChannelForm(c, kindFields, hooks) {
  const headingId = uid("edit-heading");
  const label = h("input", { type: "text", name: "label", maxlength: 100, autocomplete: "off", required: true, value: c.label });
  /** The API shows it (address, webhook URL): prefilled. Otherwise it is a secret: empty means keep. @param {KindField} f */
  const shownValue = (f) => {
    const v = /** @type {Record<string, unknown>} */ (c.config)[f.name];
    return typeof v === "string" ? v : undefined;
  };
  const inputs = kindFields.map((f) => {
    const shown = shownValue(f);
    const input = h("input", {
      type: f.type === "email" ? "email" : "text",
      name: `config.${f.name}`,
      autocomplete: "off",
      spellcheck: "false",
      inputmode: f.type === "url" ? "url" : undefined,
      value: shown ?? "",
    });
    const kept = c.kind === "webhook" ? "the stored secret" : `the stored URL${c.config.webhookUrlHint ? ` (${c.config.webhookUrlHint})` : ""}`;
    const hint = shown === undefined ? `Never shown again once saved. Leave empty to keep ${kept}; or enter a new one.` : f.hint;
    const text = shown === undefined ? f.label.replace(" (optional)", "") : f.label;
    return { f, input, shown, element: field(text, input, hint) };
  });
  const save = h("button", { type: "submit" }, "Save changes");
  const close = h("button", { type: "button", class: "secondary" }, "Close");
  close.addEventListener("click", hooks.close);
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": headingId, class: "channel-edit", "data-editing": c.id },
    h("h3", { id: headingId }, `Edit ${c.label}`),
    h(
      "div",
      { class: "grid" },
      field("Name", label),
      inputs.map((i) => i.element),
    ),
    inputs.length > 0
      ? h("p", { class: "sub" }, "A changed destination makes the channel unverified until a test send succeeds or you mark it verified.")
      : null,
    h("div", { class: "actions" }, save, close),
  );
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") hooks.close();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    /** @type {{label?: string, config?: Record<string, string>}} */
    const patch = {};
    if (label.value.trim() !== c.label) patch.label = label.value;
    // The config is replaced as a whole: the shown fields go as they stand (an emptied one is the API's to refuse
    // at its field), a secret only when one was typed.
    /** @type {Record<string, string>} */
    const config = {};
    let changed = false;
    for (const { f, input, shown } of inputs) {
      const value = input.value.trim();
      if (shown !== undefined) {
        config[f.name] = value;
        if (value !== shown) changed = true;
      } else if (value) {
        config[f.name] = value;
        changed = true;
      }
    }
    if (changed) patch.config = config;
    if (!patch.label && !patch.config) {
      hooks.close();
      return;
    }
    save.disabled = true;
    try {
      /** @type {Channel} */
      const updated = await api("PATCH", `/notifications/channels/${encodeURIComponent(c.id)}`, patch);
      const unverified =
        changed && c.verified && !updated.verified ? "; its destination changed, so it is unverified until a test send succeeds or you mark it verified" : "";
      await hooks.saved(updated, `${updated.label} saved${unverified}.`);
    } catch (e) {
      // A problem naming `config` alone is blamed on the kind's first input; the rest name their input.
      showProblem(form, e, inputs[0] ? { config: inputs[0].input } : {});
    } finally {
      save.disabled = false;
    }
  });
  return { form, focus: () => label.focus() };
}
