// @ts-check
/**
 * The in-app alert feed (GET /api/notifications/deliveries, newest first): each entry with the
 * state of its external sends, and "Mark seen" (POST deliveries/{id}/seen). It reloads when the
 * shell's badge sees the unseen count change, so a new alert shows without a reload.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { refreshUnseen, UNSEEN_EVENT } from "./notifications-badge.js";

const SHOWN = 20;
/** The API's largest page: the feed shows at most this many of the latest alerts. */
const MOST = 100;

/**
 * @typedef {{id: string, category: string, title: string, message: string | null, seen: boolean, createdAt: string,
 *   sends: {kind: string, status: string, lastError: string | null}[]}} Delivery
 */

/**
 * @param {{canWrite: boolean, categoryLabel: (id: string) => string}} opts
 */
export function feedSection({ canWrite, categoryLabel }) {
  const list = h("ul", { class: "feed", "aria-labelledby": "feed-heading" });
  const status = h("p", { role: "status", class: "sub" }, "Loading alerts…");
  const failure = h("p", { role: "alert", class: "form-alert" });
  failure.hidden = true;
  const markAll = h("button", { type: "button", class: "secondary small", disabled: !canWrite }, "Mark all shown as seen");
  markAll.hidden = true;
  const older = h("button", { type: "button", class: "secondary small" }, "Show older alerts");
  older.hidden = true;
  const section = h(
    "section",
    { "aria-labelledby": "feed-heading" },
    h("h2", { id: "feed-heading" }, "Alerts"),
    failure,
    status,
    list,
    h("div", { class: "actions" }, markAll, older),
  );

  /** @type {Delivery[]} */
  let shown = [];
  /** How many of the latest alerts are listed (grows with "Show older alerts"; every reload keeps it). */
  let want = SHOWN;
  let loading = Promise.resolve();

  /** @param {Delivery} d */
  const seen = async (d) => {
    failure.hidden = true;
    try {
      await api("POST", `/notifications/deliveries/${encodeURIComponent(d.id)}/seen`);
    } catch (e) {
      failure.textContent = `${d.title} not marked seen: ${explain(e)}`;
      failure.hidden = false;
      return false;
    }
    return true;
  };

  /** @param {Delivery} d */
  const item = (d) => {
    const when = new Date(d.createdAt);
    const mark = d.seen
      ? null
      : h(
          "button",
          {
            type: "button",
            class: "secondary small",
            disabled: !canWrite,
            "aria-label": `Mark seen: ${d.title}`,
            onclick: async () => {
              if (await seen(d)) {
                await reload();
                await refreshUnseen();
                /** @type {HTMLElement | null} */ (section.querySelector("h2"))?.focus();
              }
            },
          },
          "Mark seen",
        );
    return h(
      "li",
      { class: d.seen ? "seen" : "unseen", "data-delivery": d.id },
      h(
        "div",
        { class: "feed-head" },
        d.seen ? null : h("span", { class: "badge unseen-tag" }, "new"),
        h("strong", {}, d.title),
        h("span", { class: "sub" }, `${categoryLabel(d.category)} · `, h("time", { datetime: d.createdAt }, when.toLocaleString())),
      ),
      d.message ? h("p", { class: "feed-message" }, d.message) : null,
      d.sends.length
        ? h(
            "p",
            { class: "sub" },
            "Sent to: ",
            d.sends.map((s, i) => [i ? ", " : "", `${s.kind} ${s.status}${s.lastError ? ` (${s.lastError})` : ""}`]),
          )
        : null,
      mark,
    );
  };

  const load = async () => {
    try {
      const page = await api("GET", `/notifications/deliveries?limit=${want}`);
      shown = page.items;
      older.hidden = !page.nextCursor || want >= MOST;
    } catch (e) {
      status.textContent = explain(e);
      return;
    }
    list.replaceChildren(...shown.map(item));
    const unseen = shown.filter((d) => !d.seen).length;
    status.textContent = shown.length === 0 ? "No alerts yet." : `${shown.length} latest alert${shown.length === 1 ? "" : "s"}, ${unseen} unseen.`;
    markAll.hidden = unseen === 0;
  };
  // One load at a time, in order: a poll's reload never overtakes a click's.
  const reload = () => (loading = loading.then(load));

  older.addEventListener("click", async () => {
    want = Math.min(MOST, want + SHOWN);
    await reload();
  });

  markAll.addEventListener("click", async () => {
    markAll.disabled = true;
    for (const d of shown.filter((x) => !x.seen)) if (!(await seen(d))) break;
    markAll.disabled = !canWrite;
    await reload();
    await refreshUnseen();
    /** @type {HTMLElement | null} */ (section.querySelector("h2"))?.focus();
  });

  /** @param {Event} _event */
  const onCount = (_event) => {
    if (!section.isConnected) return window.removeEventListener(UNSEEN_EVENT, onCount);
    void reload();
  };
  window.addEventListener(UNSEEN_EVENT, onCount);
  /** @type {HTMLElement} */ (section.querySelector("h2")).tabIndex = -1;
  return { section, ready: reload() };
}
