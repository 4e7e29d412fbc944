// @ts-check
/**
 * Error display: a problem's `field` is shown at the input it names (aria-invalid, the
 * message tied to it by aria-describedby, focus moved there); a problem without a field,
 * or naming none on this form, goes to the form's alert line. A 403 says what is missing.
 */
import { ApiError } from "./api.js";
import { h, uid } from "./dom.js";

/** @param {HTMLElement} form */
export function clearErrors(form) {
  for (const el of Array.from(form.querySelectorAll("[aria-invalid]"))) {
    el.removeAttribute("aria-invalid");
    const described = (el.getAttribute("aria-describedby") || "").split(" ").filter((id) => !id.startsWith("err-"));
    if (described.length) el.setAttribute("aria-describedby", described.join(" "));
    else el.removeAttribute("aria-describedby");
  }
  for (const el of Array.from(form.querySelectorAll(".field-error"))) el.remove();
  const alert = formAlert(form);
  alert.textContent = "";
  alert.hidden = true;
}

/**
 * @param {HTMLElement} input
 * @param {string} message
 */
export function showFieldError(input, message) {
  const id = uid("err");
  input.setAttribute("aria-invalid", "true");
  input.setAttribute("aria-describedby", [input.getAttribute("aria-describedby"), id].filter(Boolean).join(" "));
  const note = h("p", { class: "field-error", id }, message);
  // After the input's label wrapper or its env-var row when there is one, so the message sits under the field.
  const anchor = input.closest(".field, .env-row") || input;
  anchor.after(note);
}

/** The form's alert line (created on first use). @param {HTMLElement} form */
export function formAlert(form) {
  let alert = /** @type {HTMLElement | null} */ (form.querySelector(":scope > .form-alert"));
  if (!alert) {
    alert = h("p", { class: "form-alert", role: "alert" });
    alert.hidden = true;
    form.prepend(alert);
  }
  return alert;
}

/** @param {HTMLElement} form @param {string} message */
export function showFormError(form, message) {
  const alert = formAlert(form);
  alert.textContent = message;
  alert.hidden = false;
}

/** The words shown for a failed call, by status. @param {unknown} error */
export function explain(error) {
  if (!(error instanceof ApiError)) return "Something went wrong in the page. Reload and try again.";
  const detail = error.problem.detail || error.problem.title || `HTTP ${error.status}`;
  if (error.status === 403 && /not a member|No active organization/.test(detail)) {
    return `Not allowed: you are no longer a member of this organization. Choose another one above, or ask an owner to invite you again.`;
  }
  if (error.status === 403) return `Not allowed: ${detail}. Your role in this organization does not permit this; an owner or admin can change your role.`;
  if (error.status === 404) return `Not found: ${detail}.`;
  if (error.status === 429) return `Too many attempts: ${detail}`;
  if (error.status >= 500) return `The server failed: ${detail}${error.problem.requestId ? ` (request ${error.problem.requestId})` : ""}`;
  return detail;
}

/**
 * Shows a failed call on `form`: at the field the problem names when this form has it.
 * @param {HTMLElement} form
 * @param {unknown} error
 * @param {Record<string, HTMLElement | undefined>} [fields] API field path -> element, beyond inputs named by it
 */
export function showProblem(form, error, fields = {}) {
  const field = error instanceof ApiError ? error.problem.field : undefined;
  if (field) {
    const named = form.querySelector(`[name="${CSS.escape(field)}"]`);
    const target = fields[field] || /** @type {HTMLElement | null} */ (named);
    if (target) {
      showFieldError(target, explain(error));
      target.focus();
      return;
    }
  }
  showFormError(form, explain(error));
}

/**
 * Labelled input: `<div class="field"><label for=id>text</label><input id=id …></div>`.
 * @param {string} text
 * @param {HTMLInputElement | HTMLSelectElement} input
 * @param {string} [hint] shown under the label and tied by aria-describedby
 */
export function field(text, input, hint) {
  input.id ||= uid("f");
  const hintEl = hint ? h("span", { class: "hint", id: `${input.id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: input.id }, text), hintEl, input);
}
