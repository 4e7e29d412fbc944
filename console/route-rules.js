// @ts-check
/**
 * A project's route rules (GET /api/projects/{id}/route-rules), listed in the order the edge
 * checks them: bans, then allow-deny, then rate limits, each kind oldest first. The API has no
 * priority field, so there is nothing to reorder; the page says how the order is decided.
 * With project:write: add a rule (route-rules-form.js), enable or disable one, edit it, delete it
 * after a confirmation (PATCH / DELETE …/route-rules/{ruleId}). Without it the list is read-only
 * and says why. Route rules are a self-hosted server's: elsewhere the routes are unknown and
 * the page says so in a sentence.
 */
import { projectSubpage } from "./project-subpage.js";
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { KINDS, kindWords, ruleForm } from "./route-rules-form.js";
import { isUnknownRoute } from "./self-hosted-only.js";

/** @typedef {import("./route-rules-form.js").RouteRule} RouteRule */

/** @param {HTMLElement} main @param {import("./app.js").Ctx} ctx @param {string} projectId */
export async function routeRulesPage(main, ctx, projectId) {
  const frame = projectSubpage(main, projectId, "Route rules");
  const { base, heading, back } = frame;

  const project = await frame.load();
  if (!project) return;

  const canWrite = ctx.can("project:write");
  const count = h("span", {}, "Loading rules…");
  const outcome = h("span", {});
  const status = h("p", { role: "status" }, count, " ", outcome);
  const rows = h("tbody");
  const table = h(
    "table",
    { class: "rules" },
    h("caption", { class: "visually-hidden" }, "Route rules, in the order the edge checks them"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Order", "Rule", "Path", "Parameters", "State", canWrite ? "Actions" : null].filter(Boolean).map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );
  const wrap = h("div", { class: "table-wrap rules-wrap", tabindex: "0", role: "region", "aria-labelledby": "rules-heading" }, table);
  // The edit form opens here, under the table (a form inside a row would not fit a phone).
  const editSlot = h("div", {});
  const note = canWrite
    ? null
    : h(
        "p",
        { class: "note", id: "rules-read-only" },
        `You can read these rules but not change them: your role in this organization is ${ctx.role ?? "unknown"}, which does not include project:write. A member, admin or owner can.`,
      );

  /** @type {RouteRule[]} */
  let rules = [];
  const load = async () => {
    /** @type {{items: RouteRule[]}} */
    const list = await api("GET", `${base}/route-rules`);
    rules = inEvaluationOrder(list.items);
    rows.replaceChildren(...rules.map((r, i) => row(r, i + 1)));
    wrap.hidden = rules.length === 0;
    count.textContent = rules.length === 0 ? "No rules: every request reaches the app." : `${rules.length} ${rules.length === 1 ? "rule" : "rules"}.`;
  };

  try {
    await load();
  } catch (e) {
    const text = isUnknownRoute(e)
      ? "This server has no route rules: they are applied by the edge of a self-hosted server, where this page manages them."
      : explain(e);
    main.replaceChildren(back, heading, h("p", { role: isUnknownRoute(e) ? "status" : "alert", class: "note" }, text));
    return;
  }

  /** Runs a change, reloads, says what happened and puts the focus back on the rule's row (or `fallback`). */
  const changed = async (/** @type {string} */ message, /** @type {string | null} */ ruleId, /** @type {HTMLElement} */ fallback) => {
    await load();
    outcome.textContent = message;
    const again = ruleId ? /** @type {HTMLElement | null} */ (rows.querySelector(`tr[data-rule="${CSS.escape(ruleId)}"] button`)) : null;
    (again ?? fallback).focus();
  };

  /** @param {RouteRule} r @param {number} order */
  function row(r, order) {
    const cells = [
      h("td", {}, String(order)),
      h("th", { scope: "row" }, kindWords(r.kind), h("span", { class: "sub wrap" }, " ", h("code", {}, r.id))),
      h("td", { class: "wrap" }, r.path ? h("code", {}, r.path) : "Every path"),
      h("td", { class: "wrap" }, parameters(r)),
      h("td", {}, h("span", { class: `badge ${r.enabled ? "status-ready" : "status-canceled"}` }, r.enabled ? "enabled" : "disabled")),
    ];
    if (canWrite) cells.push(h("td", { class: "row-actions" }, actionsFor(r)));
    return h("tr", { "data-rule": r.id, class: r.enabled ? null : "disabled-rule" }, cells);
  }

  /** @param {RouteRule} r */
  function actionsFor(r) {
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const fail = (/** @type {unknown} */ e) => {
      error.textContent = explain(e);
      error.hidden = false;
    };
    const named = (/** @type {string} */ verb) => [verb, h("span", { class: "visually-hidden" }, ` rule ${r.id}`)];
    const toggle = h("button", { type: "button", class: "secondary small" }, named(r.enabled ? "Disable" : "Enable"));
    const edit = h("button", { type: "button", class: "secondary small" }, named("Edit"));
    const remove = h("button", { type: "button", class: "secondary small" }, named("Delete"));
    const controls = h("div", { class: "actions" }, toggle, edit, remove);
    toggle.addEventListener("click", async () => {
      error.hidden = true;
      try {
        await api("PATCH", `${base}/route-rules/${encodeURIComponent(r.id)}`, { enabled: !r.enabled });
        await changed(`Rule ${r.id} is ${r.enabled ? "disabled: the edge no longer checks it" : "enabled"}.`, r.id, heading);
      } catch (e) {
        fail(e);
      }
    });
    edit.addEventListener("click", () => {
      outcome.textContent = "";
      const form = ruleForm(base, {
        rule: r,
        saved: async (rule) => {
          editSlot.replaceChildren();
          await changed(`Rule ${rule.id} was saved.`, rule.id, heading);
        },
        close: () => {
          editSlot.replaceChildren();
          if (edit.isConnected) edit.focus();
          else heading.focus();
        },
      });
      editSlot.replaceChildren(form);
      /** @type {HTMLElement | null} */ (form.querySelector("h3"))?.focus();
    });
    remove.addEventListener("click", () => {
      error.hidden = true;
      const confirm = h("button", { type: "button", class: "small" }, "Delete", h("span", { class: "visually-hidden" }, ` rule ${r.id}`), " now");
      const keep = h("button", { type: "button", class: "secondary small" }, "Keep");
      const question = h(
        "div",
        {},
        h("span", { class: "confirm-text" }, `Delete this ${kindWords(r.kind).toLowerCase()} rule? The edge stops applying it within a second.`),
        h("div", { class: "actions" }, confirm, keep),
      );
      controls.replaceWith(question);
      confirm.focus();
      keep.addEventListener("click", () => {
        question.replaceWith(controls);
        remove.focus();
      });
      confirm.addEventListener("click", async () => {
        try {
          await api("DELETE", `${base}/route-rules/${encodeURIComponent(r.id)}`);
          if (editSlot.querySelector(`[data-rule="${CSS.escape(r.id)}"]`)) editSlot.replaceChildren();
          await changed(`Rule ${r.id} was deleted.`, null, heading);
        } catch (e) {
          question.replaceWith(controls);
          fail(e);
          remove.focus();
        }
      });
    });
    return h("div", {}, controls, error);
  }

  const create = canWrite
    ? ruleForm(base, {
        saved: async (rule) => {
          await changed(`Added ${kindWords(rule.kind).toLowerCase()} rule ${rule.id}.`, rule.id, heading);
        },
      })
    : null;

  main.replaceChildren(
    back,
    heading,
    h(
      "p",
      { class: "sub" },
      "The edge checks these before a request reaches the app: only enabled rules whose path matches, bans first (403), then allow and deny rules (403), then rate limits (429); within a kind the oldest first. The first rule that refuses decides. The order follows from the kind and when a rule was added; there is no priority to change it.",
    ),
    note ?? "",
    h("section", { "aria-labelledby": "rules-heading" }, h("h2", { id: "rules-heading" }, "Rules"), status, wrap, editSlot),
    create ? h("section", {}, create) : "",
  );
}

/** Bans, allow-deny, rate limits; within a kind as the API lists them (creation order). @param {RouteRule[]} items */
function inEvaluationOrder(items) {
  const rank = (/** @type {string} */ kind) => KINDS.findIndex(([k]) => k === kind);
  return items
    .map((r, i) => ({ r, i }))
    .sort((a, b) => rank(a.r.kind) - rank(b.r.kind) || a.i - b.i)
    .map(({ r }) => r);
}

/** A rule's own fields in words. @param {RouteRule} r */
function parameters(r) {
  if (r.kind === "rate-limit") return `${r.limit} requests per ${r.windowSeconds} s per client address`;
  if (r.kind === "ban") {
    const until = r.expiresAt ? `until ${new Date(r.expiresAt).toLocaleString()}` : "no end";
    return [h("code", {}, r.cidr ?? ""), `, ${until}`, r.reason ? `: ${r.reason}` : ""];
  }
  const blocks = (r.cidrs ?? []).map((c, i) => [i ? ", " : "", h("code", {}, c)]);
  return r.mode === "allow" ? ["Only ", blocks, " pass"] : ["Refused: ", blocks];
}
