// @ts-check
/**
 * A project's connected domains (GET /api/projects/{id}/domains) with each one's routing state.
 * With `project:write`: connect a hostname (POST /api/projects/{id}/connect, which also makes it
 * primary: the API's 400 is shown at the field), make another one primary (connecting it again
 * does that), remove one after a confirmation (DELETE /api/projects/{id}/domains/{domain}).
 * Without it the list is read-only.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showProblem } from "./forms.js";

/**
 * @typedef {{hostname: string, primary: boolean, createdAt: string, routing: {state: string, checkedAt: string | null}}} Domain
 */

const ROUTING_WORDS = {
  synced: "routed now",
  pending: "not routed yet",
  offline: "offline: the project is disabled",
};

/**
 * @param {string} id the project's id
 * @param {boolean} canWrite
 * @returns {{section: HTMLElement, load: () => Promise<void>}}
 */
export function domainsSection(id, canWrite) {
  const base = `/projects/${encodeURIComponent(id)}`;
  // The count is rewritten by every reload; an action's outcome has its own line.
  const count = h("span", {}, "Loading…");
  const outcome = h("span", {});
  const status = h("p", { role: "status" }, count, " ", outcome);
  const rows = h("tbody", {});
  const table = h(
    "table",
    { class: "domains" },
    h("caption", { class: "visually-hidden" }, "Connected domains, the primary first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Domain", "Routing", "Connected", canWrite ? "Actions" : null].filter(Boolean).map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );
  const wrap = h("div", { class: "table-wrap" }, table);

  async function load() {
    try {
      /** @type {{items: Domain[]}} */
      const list = await api("GET", `${base}/domains`);
      rows.replaceChildren(...list.items.map(row));
      wrap.hidden = list.items.length === 0;
      count.textContent = list.items.length === 0 ? "No domains connected." : `${list.items.length} domain${list.items.length === 1 ? "" : "s"} connected.`;
    } catch (e) {
      rows.replaceChildren();
      count.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  /** @param {Domain} d */
  function row(d) {
    const state = ROUTING_WORDS[/** @type {keyof typeof ROUTING_WORDS} */ (d.routing.state)] ?? d.routing.state;
    const cells = [
      h("th", { scope: "row" }, d.hostname, d.primary ? h("span", { class: "badge" }, "primary") : null),
      h("td", {}, h("span", { class: `badge routing-${d.routing.state}` }, d.routing.state), " ", h("span", { class: "sub" }, state)),
      h("td", {}, new Date(d.createdAt).toLocaleString()),
    ];
    if (canWrite) cells.push(h("td", { class: "row-actions" }, actionsFor(d)));
    return h("tr", { "data-domain": d.hostname }, cells);
  }

  /** @param {Domain} d */
  function actionsFor(d) {
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const fail = (/** @type {unknown} */ e) => {
      error.textContent = explain(e);
      error.hidden = false;
    };
    const remove = h("button", { type: "button", class: "secondary small" }, "Remove", h("span", { class: "visually-hidden" }, ` ${d.hostname}`));
    const primary = d.primary
      ? null
      : h("button", { type: "button", class: "secondary small" }, "Make primary", h("span", { class: "visually-hidden" }, `: ${d.hostname}`));
    const controls = h("div", { class: "actions" }, primary, remove);
    primary?.addEventListener("click", async () => {
      error.hidden = true;
      try {
        await api("POST", `${base}/connect`, { domain: d.hostname });
        await load();
        outcome.textContent = `${d.hostname} is now the primary domain.`;
        focusRow(d.hostname, "button");
      } catch (e) {
        fail(e);
      }
    });
    remove.addEventListener("click", () => {
      error.hidden = true;
      const confirm = h("button", { type: "button", class: "small" }, "Remove", h("span", { class: "visually-hidden" }, ` ${d.hostname}`), " now");
      const cancel = h("button", { type: "button", class: "secondary small" }, "Keep");
      const question = h(
        "div",
        {},
        h(
          "span",
          { class: "confirm-text" },
          `Remove ${d.hostname}? The project stops answering on it at once${d.primary ? "; the oldest remaining domain becomes primary" : ""}.`,
        ),
        h("div", { class: "actions" }, confirm, cancel),
      );
      controls.replaceWith(question);
      confirm.focus();
      cancel.addEventListener("click", () => {
        question.replaceWith(controls);
        remove.focus();
      });
      confirm.addEventListener("click", async () => {
        try {
          await api("DELETE", `${base}/domains/${encodeURIComponent(d.hostname)}`);
          await load();
          outcome.textContent = `${d.hostname} was removed.`;
          domain.focus();
        } catch (e) {
          question.replaceWith(controls);
          fail(e);
          remove.focus();
        }
      });
    });
    return h("div", {}, controls, error);
  }

  /** @param {string} hostname @param {string} selector */
  function focusRow(hostname, selector) {
    /** @type {HTMLElement | null} */ (rows.querySelector(`tr[data-domain="${CSS.escape(hostname)}"] ${selector}`))?.focus();
  }

  const domain = h("input", { type: "text", name: "domain", required: true, maxlength: "254", autocomplete: "off", spellcheck: "false" });
  const form = h(
    "form",
    { novalidate: true },
    field("Domain", domain, "A hostname such as app.example.com; it becomes the primary domain."),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Connect domain")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    outcome.textContent = "";
    const hostname = domain.value.trim();
    try {
      await api("POST", `${base}/connect`, { domain: hostname });
      domain.value = "";
      await load();
      outcome.textContent = `${hostname} was connected and is the primary domain.`;
      domain.focus();
    } catch (e) {
      showProblem(form, e);
    }
  });

  const section = h(
    "section",
    { "aria-labelledby": "domains-heading" },
    h("h2", { id: "domains-heading" }, "Domains"),
    status,
    wrap,
    canWrite ? [h("h3", {}, "Connect a domain"), form] : null,
  );
  return { section, load };
}
