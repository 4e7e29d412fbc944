// @ts-check
/**
 * The HTTP requests page's filters: exactly those GET …/server-logs/recent and the stream take
 * (`status` class or code, `method`, `path` prefix, `since`). Inputs are named as the API's query
 * fields, so its 400 lands at the input it names (forms.js showProblem).
 */
import { h } from "./dom.js";
import { field } from "./forms.js";

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/**
 * @param {{onApply: () => void}} opts
 * @returns {{form: HTMLFormElement, query: () => URLSearchParams, describe: () => string}}
 */
export function requestFilters(opts) {
  const status = h("input", { type: "text", name: "status", autocomplete: "off", spellcheck: "false", size: "6", maxlength: "3" });
  const method = h(
    "select",
    { name: "method" },
    h("option", { value: "" }, "Any"),
    METHODS.map((m) => h("option", { value: m }, m)),
  );
  const path = h("input", { type: "text", name: "path", autocomplete: "off", spellcheck: "false", maxlength: "200" });
  const since = h("input", { type: "datetime-local", name: "since", step: "1" });
  const clear = h("button", { type: "button", class: "secondary" }, "Clear filters");
  const form = h(
    "form",
    { novalidate: true, class: "request-filters", "aria-labelledby": "filters-heading" },
    h(
      "div",
      { class: "grid" },
      field("Status", status, "A class such as 4xx, or a code such as 404"),
      field("Method", method),
      field("Path starts with", path, "Such as /api (query strings are never logged)"),
      field("Since", since, "Your local time"),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Apply filters"), clear),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    opts.onApply();
  });
  clear.addEventListener("click", () => {
    form.reset();
    opts.onApply();
  });

  const query = () => {
    const q = new URLSearchParams();
    const s = status.value.trim().toLowerCase();
    if (s) q.set("status", s);
    if (method.value) q.set("method", method.value);
    if (path.value.trim()) q.set("path", path.value.trim());
    // The input's value is local time without a zone: the Date reads it as local, the API wants an offset.
    const at = since.value ? new Date(since.value) : null;
    if (at && !Number.isNaN(at.getTime())) q.set("since", at.toISOString());
    return q;
  };
  /** The filters in words, for the empty state ("No requests match …"). */
  const describe = () => {
    const parts = [];
    if (status.value.trim()) parts.push(`status ${status.value.trim()}`);
    if (method.value) parts.push(method.value);
    if (path.value.trim()) parts.push(`paths starting with ${path.value.trim()}`);
    if (since.value) parts.push(`since ${new Date(since.value).toLocaleString()}`);
    return parts.join(", ");
  };
  return { form, query, describe };
}
