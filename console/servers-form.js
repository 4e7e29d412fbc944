// @ts-check
/**
 * The fields a build server is registered and edited with (name, labels, public URL), shared by
 * the register form (servers.js) and a server's edit form (servers-manage.js), so both send the
 * same body and show the API's 400 at the same input.
 */
import { h } from "./dom.js";
import { field, showProblem } from "./forms.js";

/** The API's limit on labels (functions/servers/schema.ts MAX_LABELS). */
const MAX_LABELS = 20;

/**
 * @typedef {{name: string, labels: string[], publicUrl: string | null}} ServerFieldValues
 */

/**
 * Labels as typed: separated by commas or spaces (a label has neither), duplicates kept once.
 * @param {string} text
 */
export const labelsOf = (text) => [...new Set(text.split(/[\s,]+/).filter(Boolean))];

/**
 * The three labelled inputs, filled from `initial` when editing.
 * @param {ServerFieldValues} [initial]
 * @param {{editing?: boolean}} [opts]
 */
export function serverFields(initial, opts = {}) {
  const name = h("input", { type: "text", name: "name", maxlength: "100", autocomplete: "off", value: initial?.name ?? "" });
  const labels = h("input", { type: "text", name: "labels", autocomplete: "off", spellcheck: "false", value: initial?.labels.join(", ") ?? "" });
  const publicUrl = h("input", {
    type: "text",
    inputmode: "url",
    name: "publicUrl",
    maxlength: "2048",
    autocomplete: "off",
    spellcheck: "false",
    value: initial?.publicUrl ?? "",
  });
  const element = h(
    "div",
    {},
    field("Name", name, "1-100 characters, e.g. build-1."),
    field(
      "Labels (optional)",
      labels,
      `Separated by commas, e.g. gpu, region=eu (at most ${MAX_LABELS}). A deploy asking for labels goes to an online server carrying all of them.${
        opts.editing ? " A runner started with --labels replaces them when it next reports." : ""
      }`,
    ),
    field(
      "Public URL (optional)",
      publicUrl,
      `Where the control plane reaches the server's edge (wsp runner --edge-port), e.g. https://build-1.example.com: requests for the apps it runs are forwarded there.${
        opts.editing ? " Empty clears it." : ""
      }`,
    ),
  );
  /** The body for POST (empty optional fields left out) or PATCH (an empty URL sent as null, which clears it). */
  const body = () => {
    /** @type {{name: string, labels: string[], publicUrl?: string | null}} */
    const out = { name: name.value.trim(), labels: labelsOf(labels.value) };
    const url = publicUrl.value.trim();
    if (url) out.publicUrl = url;
    else if (opts.editing) out.publicUrl = null;
    return out;
  };
  /**
   * A failed call shown on `form`: a bad label (`labels.3`) at the labels input, like `labels` itself.
   * @param {HTMLElement} form @param {unknown} error
   */
  const showError = (form, error) => showProblem(form, error, Object.fromEntries(Array.from({ length: MAX_LABELS + 1 }, (_, i) => [`labels.${i}`, labels])));
  return { element, name, labels, publicUrl, body, showError };
}
