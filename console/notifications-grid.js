// @ts-check
/**
 * The subscription grid: one table, a category per row and a channel per column, one labelled
 * checkbox per cell. Toggling a cell sends exactly one PUT /api/notifications/subscriptions for
 * that cell (an idempotent upsert); a refused change puts the box back and says why.
 * Also the organization's defaults (one checkbox per category), editable with notifications:admin.
 * Categories nothing produces yet (`available: false`) come last, greyed and marked "not yet
 * produced": they stay choosable, since a team's own tools may send them through the events API.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { KIND_NAMES } from "./notifications-data.js";

/**
 * @typedef {import("./notifications-data.js").Category} Category
 * @typedef {import("./notifications-data.js").Channel} Channel
 * @typedef {import("./notifications-data.js").Subscription} Subscription
 * @typedef {import("./notifications-data.js").OrgDefault} OrgDefault
 */

/**
 * A checkbox that saves itself: disabled while its request runs, restored if it is refused.
 * @param {string} name accessible name
 * @param {boolean} checked
 * @param {boolean} disabled
 * @param {(on: boolean) => Promise<boolean>} save answers the saved state
 * @param {{status: HTMLElement, failure: HTMLElement, describedBy?: string}} out
 * @param {(on: boolean) => string} said
 */
function toggle(name, checked, disabled, save, out, said) {
  const box = h("input", { type: "checkbox", "aria-label": name, checked, disabled, "aria-describedby": out.describedBy });
  box.addEventListener("change", async () => {
    const wanted = box.checked;
    box.disabled = true;
    out.failure.hidden = true;
    try {
      box.checked = await save(wanted);
      out.status.textContent = said(box.checked);
    } catch (e) {
      box.checked = !wanted;
      out.status.textContent = "";
      out.failure.textContent = `${name} not changed: ${explain(e)}`;
      out.failure.hidden = false;
    } finally {
      box.disabled = false;
      box.focus();
    }
  });
  return box;
}

/** Produced categories first, the others after them, each group in the registry's order. @param {Category[]} categories */
const producedFirst = (categories) => [...categories.filter((c) => c.available), ...categories.filter((c) => !c.available)];

/** A category's row header: its label, "not yet produced" when nothing sends it, and what triggers it. @param {Category} cat */
function categoryHeader(cat) {
  return h(
    "th",
    { scope: "row" },
    cat.label,
    !cat.available && h("span", { class: "tag-unproduced" }, "not yet produced"),
    h("span", { class: "sub" }, cat.description),
  );
}

/**
 * @param {{canWrite: boolean, categories: Category[], channels: Channel[], subscriptions: Subscription[]}} opts
 */
export function gridSection({ canWrite, categories, channels, subscriptions }) {
  const status = h("p", { role: "status", class: "saved" });
  const failure = h("p", { role: "alert", class: "form-alert" });
  failure.hidden = true;
  /** @type {Map<string, Subscription>} */
  const cells = new Map(subscriptions.map((s) => [`${s.category} ${s.channelId}`, s]));
  const section = h(
    "section",
    { "aria-labelledby": "grid-heading" },
    h("h2", { id: "grid-heading" }, "What you receive, where"),
    h(
      "p",
      { class: "sub", id: "grid-hint" },
      'Each box sends one category of alerts to one of your channels. A change is saved at once. Categories marked "not yet produced" are never sent by Workspace itself yet; only your own tools can send them.',
    ),
    failure,
  );
  if (channels.length === 0) {
    section.append(h("p", {}, "No channels yet: add one below to choose what it receives."));
    return section;
  }
  const table = h(
    "table",
    { class: "grid-table" },
    h("caption", { class: "visually-hidden" }, "Subscriptions: categories by channel"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Category"),
        channels.map((c) =>
          h(
            "th",
            { scope: "col" },
            c.label,
            h("span", { class: "sub" }, KIND_NAMES[c.kind], c.verified ? "" : " · unverified", c.enabled ? "" : " · disabled"),
          ),
        ),
      ),
    ),
    h(
      "tbody",
      {},
      producedFirst(categories).map((cat) =>
        h(
          "tr",
          { class: cat.available ? undefined : "unproduced" },
          categoryHeader(cat),
          channels.map((ch) =>
            h(
              "td",
              { class: "cell" },
              toggle(
                `${cat.label} on ${ch.label}`,
                cells.get(`${cat.id} ${ch.id}`)?.enabled ?? false,
                !canWrite,
                async (on) => (await api("PUT", "/notifications/subscriptions", { category: cat.id, channelId: ch.id, enabled: on })).enabled,
                { status, failure, describedBy: canWrite ? undefined : "notifications-read-only" },
                (on) => `Saved: ${cat.label} on ${ch.label} is ${on ? "on" : "off"}.`,
              ),
            ),
          ),
        ),
      ),
    ),
  );
  section.append(h("div", { class: "table-wrap" }, table), status);
  return section;
}

/**
 * @param {{canAdmin: boolean, role: string | undefined, categories: Category[], defaults: OrgDefault[]}} opts
 */
export function defaultsSection({ canAdmin, role, categories, defaults }) {
  const status = h("p", { role: "status", class: "saved" });
  const failure = h("p", { role: "alert", class: "form-alert" });
  failure.hidden = true;
  const byCategory = new Map(defaults.map((d) => [d.category, d]));
  const reason = canAdmin
    ? null
    : h(
        "p",
        { class: "note", id: "defaults-read-only" },
        `Read-only: your role in this organization is ${role ?? "unknown"}, which does not include notifications:admin. An owner or admin sets the defaults.`,
      );
  /** @param {OrgDefault | undefined} d */
  const source = (d) => (d?.overridden ? "set by the organization" : "the category's own default");
  const table = h(
    "table",
    {},
    h("caption", { class: "visually-hidden" }, "Organization defaults by category"),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Category"), h("th", { scope: "col" }, "On for new members"), h("th", { scope: "col" }, "Source"))),
    h(
      "tbody",
      {},
      producedFirst(categories).map((cat) => {
        const d = byCategory.get(cat.id);
        const from = h("td", {}, source(d));
        return h(
          "tr",
          { class: cat.available ? undefined : "unproduced" },
          h("th", { scope: "row" }, cat.label, !cat.available && h("span", { class: "tag-unproduced" }, "not yet produced")),
          h(
            "td",
            { class: "cell" },
            toggle(
              `${cat.label} on by default`,
              d?.defaultEnabled ?? cat.defaultEnabled,
              !canAdmin,
              async (on) => {
                const saved = /** @type {OrgDefault} */ (await api("PUT", "/notifications/defaults", { category: cat.id, defaultEnabled: on }));
                from.textContent = source(saved);
                return saved.defaultEnabled;
              },
              { status, failure, describedBy: canAdmin ? undefined : "defaults-read-only" },
              (on) => `Saved: ${cat.label} is ${on ? "on" : "off"} by default for members who join from now on.`,
            ),
          ),
          from,
        );
      }),
    ),
  );
  return h(
    "section",
    { "aria-labelledby": "defaults-heading" },
    h("h2", { id: "defaults-heading" }, "Organization defaults"),
    h("p", { class: "sub" }, "What a member's in-app channel receives when they join. Members already in the organization keep their own choices."),
    reason,
    failure,
    h("div", { class: "table-wrap" }, table),
    status,
  );
}
