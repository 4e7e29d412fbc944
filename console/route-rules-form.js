// @ts-check
/**
 * The route-rule form: create (POST …/route-rules, the kind chosen first, then that kind's fields)
 * or edit (PATCH …/route-rules/{ruleId}; the kind cannot change, the API has no such field).
 * Inputs are named as the API's body fields, so its 400 is shown at the input it names
 * (forms.js showProblem); a bad block in the allow-deny list (`cidrs.3`) is shown at the list,
 * naming its line.
 */
import { api, ApiError } from "./api.js";
import { h, uid } from "./dom.js";
import { clearErrors, field, showProblem } from "./forms.js";

/**
 * A rule as the API answers it: the common fields and those of its kind.
 * @typedef {{id: string, projectId: string, kind: "rate-limit" | "ban" | "allow-deny", path: string | null, enabled: boolean,
 *   limit?: number, windowSeconds?: number, by?: "ip", cidr?: string, expiresAt?: string | null, reason?: string | null,
 *   mode?: "allow" | "deny", cidrs?: string[], createdAt: string, updatedAt: string}} RouteRule
 */

/** Kinds in the order the edge evaluates them, with the words the page shows. */
export const KINDS = /** @type {const} */ ([
  ["ban", "Ban"],
  ["allow-deny", "Allow or deny"],
  ["rate-limit", "Rate limit"],
]);

/** @param {string} kind */
export const kindWords = (kind) => KINDS.find(([k]) => k === kind)?.[1] ?? kind;

/** An ISO time as a datetime-local input's value (local time, no zone). @param {string | null | undefined} iso */
function localInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
}

/** A number input's value, or undefined when empty (the API then names the field as required). @param {HTMLInputElement} input */
const numberOf = (input) => (input.value.trim() === "" ? undefined : Number(input.value));

/**
 * @param {string} base `/projects/<id>`
 * @param {{rule?: RouteRule, saved: (rule: RouteRule) => Promise<void> | void, close?: () => void}} opts
 * @returns {HTMLFormElement}
 */
export function ruleForm(base, opts) {
  const editing = opts.rule;
  const headingId = uid("rule-form");
  const kind = h(
    "select",
    { name: "kind" },
    KINDS.map(([k, words]) => h("option", { value: k, selected: k === "ban" }, words)),
  );
  const path = h("input", { type: "text", name: "path", autocomplete: "off", spellcheck: "false", maxlength: "200", value: editing?.path ?? "" });
  const enabled = h("input", { type: "checkbox", name: "enabled", id: uid("f"), checked: editing ? editing.enabled : true });

  const limit = h("input", { type: "number", name: "limit", min: "1", inputmode: "numeric", value: editing?.limit ?? "" });
  const windowSeconds = h("input", { type: "number", name: "windowSeconds", min: "1", inputmode: "numeric", value: editing?.windowSeconds ?? "" });
  const cidr = h("input", { type: "text", name: "cidr", autocomplete: "off", spellcheck: "false", maxlength: "64", value: editing?.cidr ?? "" });
  const expiresAt = h("input", { type: "datetime-local", name: "expiresAt", step: "1", value: localInput(editing?.expiresAt) });
  const reason = h("input", { type: "text", name: "reason", autocomplete: "off", maxlength: "500", value: editing?.reason ?? "" });
  const mode = h(
    "select",
    { name: "mode" },
    h("option", { value: "deny", selected: editing?.mode !== "allow" }, "Deny: these addresses are refused (403)"),
    h("option", { value: "allow", selected: editing?.mode === "allow" }, "Allow: only these addresses pass, everyone else 403"),
  );
  const cidrsId = uid("f");
  const cidrs = h("textarea", { id: cidrsId, name: "cidrs", rows: "4", spellcheck: "false", "aria-describedby": `${cidrsId}-hint` });
  cidrs.value = (editing?.cidrs ?? []).join("\n");

  /** Each kind's fields, shown only while that kind is chosen. */
  const groups = {
    "rate-limit": h(
      "div",
      { class: "grid" },
      field("Requests allowed", limit, "Per window and client address, at least 1"),
      field("Window (seconds)", windowSeconds, "1 to 86400 (a day)"),
    ),
    ban: h(
      "div",
      { class: "grid" },
      field("Address or block", cidr, "An IPv4 or IPv6 address or CIDR block, such as 203.0.113.0/24"),
      field("Ends (optional)", expiresAt, "Your local time; empty: never"),
      field("Reason (optional)", reason, "A note for operators, never shown to the client"),
    ),
    "allow-deny": h(
      "div",
      {},
      field("Mode", mode),
      h(
        "div",
        { class: "field" },
        h("label", { for: cidrsId }, "Addresses or blocks"),
        h("span", { class: "hint", id: `${cidrsId}-hint` }, "One per line (up to 100), such as 10.0.0.0/8 or 2001:db8::/32"),
        cidrs,
      ),
    ),
  };
  const current = () => /** @type {RouteRule["kind"]} */ (editing?.kind ?? kind.value);
  const showKind = () => {
    for (const [k, group] of Object.entries(groups)) group.hidden = k !== current();
  };
  kind.addEventListener("change", showKind);
  showKind();

  const submit = h("button", { type: "submit" }, editing ? "Save changes" : "Add rule");
  const close = opts.close ? h("button", { type: "button", class: "secondary", onclick: opts.close }, "Close") : null;
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": headingId, class: editing ? "rule-form channel-edit" : "rule-form", "data-rule": editing?.id },
    h(editing ? "h3" : "h2", { id: headingId, tabindex: "-1" }, editing ? `Edit ${kindWords(editing.kind).toLowerCase()} rule ${editing.id}` : "Add a rule"),
    editing ? null : field("Kind", kind, "Bans are checked first, then allow and deny rules, then rate limits"),
    field("Path (optional)", path, "Empty: every path. /api covers /api and /api/…; * matches within a segment, ** across"),
    h("div", { class: "field" }, h("label", { class: "check", for: enabled.id }, enabled, " Enabled (a disabled rule is kept but not checked)")),
    Object.values(groups),
    h("div", { class: "actions" }, submit, close),
  );

  const body = () => {
    /** @type {Record<string, unknown>} */
    const b = editing ? {} : { kind: current() };
    b.path = path.value.trim() || null;
    b.enabled = enabled.checked;
    if (current() === "rate-limit") Object.assign(b, { limit: numberOf(limit), windowSeconds: numberOf(windowSeconds) });
    if (current() === "ban") {
      const until = expiresAt.value ? new Date(expiresAt.value) : null;
      Object.assign(b, { cidr: cidr.value.trim(), expiresAt: until ? until.toISOString() : null, reason: reason.value.trim() || null });
    }
    if (current() === "allow-deny") {
      const lines = cidrs.value.split("\n").map((l) => l.trim());
      Object.assign(b, { mode: mode.value, cidrs: lines.filter(Boolean) });
    }
    return b;
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    submit.disabled = true;
    try {
      /** @type {RouteRule} */
      const rule = editing
        ? await api("PATCH", `${base}/route-rules/${encodeURIComponent(editing.id)}`, body())
        : await api("POST", `${base}/route-rules`, body());
      if (!editing) {
        // Ready for the next rule of the same kind.
        const chosen = kind.value;
        form.reset();
        kind.value = chosen;
        enabled.checked = true;
      }
      await opts.saved(rule);
    } catch (e) {
      showProblem(form, atLine(e), { cidrs });
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/**
 * A problem naming one block of the list (`cidrs.2`) is shown at the list, naming the line as the
 * user counts (blank lines are not sent, so it is the n-th address entered).
 * @param {unknown} e
 */
function atLine(e) {
  const match = e instanceof ApiError ? /^cidrs\.(\d+)$/.exec(e.problem.field ?? "") : null;
  if (!(e instanceof ApiError) || !match) return e;
  const n = Number(match[1]) + 1;
  const detail = (e.problem.detail ?? "").replace(/^cidrs\.\d+/, `Address ${n}`);
  return new ApiError(e.status, { ...e.problem, field: "cidrs", detail });
}
