// @ts-check
/**
 * A secret the API answers once (a personal access token, a runner token, an invitation code):
 * shown in a read-only field with a Copy button and a "Done" button that removes it. The value is
 * set as the field's property, never as an attribute or text, and lives only in this element:
 * "Done", leaving the page (the view is replaced) or a reload drops it, and no API call answers it
 * again.
 */
import { h, uid } from "./dom.js";

/**
 * @typedef {{label: string, value: string, hint?: string, multiline?: boolean}} Shown
 */

/**
 * A card showing each value once, with its own Copy button. `onDone` runs after "Done" removed it
 * (to put the focus back somewhere useful).
 * @param {string} title
 * @param {Shown[]} values
 * @param {() => void} [onDone]
 * @returns {HTMLElement}
 */
export function shownOnce(title, values, onDone) {
  const status = h("p", { role: "status", class: "saved" });
  const headingId = uid("once");
  const fields = values.map((v) => {
    const id = uid("secret");
    const input = v.multiline
      ? h("textarea", { id, readonly: true, rows: "3", spellcheck: "false", class: "secret" })
      : h("input", { id, type: "text", readonly: true, spellcheck: "false", autocomplete: "off", class: "secret" });
    input.value = v.value;
    const hintId = v.hint ? `${id}-hint` : null;
    if (hintId) input.setAttribute("aria-describedby", hintId);
    const copy = h("button", { type: "button", class: "secondary small" }, "Copy", h("span", { class: "visually-hidden" }, ` ${v.label}`));
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(input.value);
        status.textContent = `${v.label} copied.`;
      } catch {
        // No clipboard access (an insecure origin, a refused permission): select it for Ctrl+C.
        input.focus();
        input.select();
        status.textContent = `Selected: press Ctrl+C (⌘C) to copy the ${v.label.toLowerCase()}.`;
      }
    });
    return h(
      "div",
      { class: "field" },
      h("label", { for: id }, v.label),
      hintId ? h("span", { class: "hint", id: hintId }, v.hint) : null,
      h("div", { class: "secret-row" }, input, copy),
    );
  });
  const done = h("button", { type: "button" }, "Done");
  const card = h(
    "section",
    { class: "once", "aria-labelledby": headingId, tabindex: "-1" },
    h("h3", { id: headingId }, title),
    h("p", { class: "note" }, "Shown only now: copy it somewhere safe. It cannot be shown again."),
    fields,
    status,
    h("div", { class: "actions" }, done),
  );
  done.addEventListener("click", () => {
    for (const el of Array.from(card.querySelectorAll(".secret"))) /** @type {HTMLInputElement} */ (el).value = "";
    card.remove();
    onDone?.();
  });
  return card;
}
