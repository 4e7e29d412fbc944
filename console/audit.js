// @ts-check
/**
 * Audit log: who did what to which object in the active organization, newest first
 * (GET /api/orgs/{orgId}/audit, owners and admins: org:admin). A filter by action,
 * pages of 50 with "Show older". Entries never hold a secret (the API records names only),
 * and every value from the API is inserted as text.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";

/**
 * @typedef {{id: string, at: string, actor: {kind: string, userId: string | null, tokenId: string | null},
 *   action: string, target: {kind: string, id: string | null}, clientAddress: string | null,
 *   details: Record<string, unknown> | null}} AuditEntry
 */

/** The API's actions (functions/operations/audit/record.ts AUDIT_ACTIONS), for the filter. */
const ACTIONS = [
  "token.created",
  "token.revoked",
  "member.invited",
  "invitation.revoked",
  "member.removed",
  "member.role_changed",
  "settings.changed",
  "clone_token.changed",
  "env.changed",
  "project.created",
  "project.deleted",
  "project.transferred",
  "deployment.created",
  "deployment.promoted",
  "deployment.canceled",
  "domain.added",
  "domain.removed",
  "route_rules.changed",
  "channel.created",
  "channel.updated",
  "channel.deleted",
  "server.registered",
  "server.updated",
  "server.deleted",
];
const PAGE = 50;

/** @param {AuditEntry["actor"]} actor */
function who(actor) {
  if (actor.kind === "system") return "the system";
  if (actor.kind === "token") return `${actor.userId ?? "?"} (token ${actor.tokenId ?? "?"})`;
  return actor.userId ?? "?";
}

/** Details as `key: value` pairs, values as JSON text. @param {AuditEntry["details"]} details */
function detailsText(details) {
  if (!details) return "";
  return Object.entries(details)
    .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join("; ");
}

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 */
export async function auditPage(main, ctx) {
  document.title = "Audit log · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Audit log");
  const orgId = ctx.me.activeOrganizationId;
  const org = ctx.me.organizations.find((o) => o.id === orgId);
  if (!orgId || !ctx.can("org:admin")) {
    main.replaceChildren(
      heading,
      h(
        "p",
        { class: "note" },
        `The audit log is for owners and admins: your role${org ? ` in ${org.name}` : ""} (${ctx.role ?? "none"}) does not include org:admin.`,
      ),
    );
    return;
  }
  const action = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { id: "audit-action" },
      h("option", { value: "" }, "All actions"),
      ACTIONS.map((a) => h("option", { value: a }, a)),
    )
  );
  const status = h("p", { role: "status" }, "Loading…");
  const rows = h("tbody", {});
  const table = h(
    "table",
    { class: "audit" },
    h("caption", { class: "visually-hidden" }, "Audit log entries, newest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["When", "Who", "Action", "Target", "From", "Details"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "Show older");
  /** @type {string | null} */
  let cursor = null;

  /** @param {boolean} append */
  async function load(append) {
    more.hidden = true;
    status.textContent = "Loading…";
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (action.value) query.set("action", action.value);
    if (append && cursor) query.set("cursor", cursor);
    try {
      /** @type {{items: AuditEntry[], nextCursor: string | null}} */
      const page = await api("GET", `/orgs/${encodeURIComponent(orgId ?? "")}/audit?${query}`);
      if (!append) rows.replaceChildren();
      for (const e of page.items) {
        rows.append(
          h(
            "tr",
            {},
            h("td", {}, h("time", { datetime: e.at }, new Date(e.at).toLocaleString())),
            h("td", {}, who(e.actor)),
            h("td", {}, h("code", {}, e.action)),
            h("td", {}, `${e.target.kind}${e.target.id ? ` ${e.target.id}` : ""}`),
            h("td", {}, e.clientAddress ?? ""),
            h("td", {}, detailsText(e.details)),
          ),
        );
      }
      cursor = page.nextCursor;
      more.hidden = !cursor;
      status.textContent = rows.children.length === 0 ? "No entries." : `${rows.children.length} entr${rows.children.length === 1 ? "y" : "ies"} shown.`;
    } catch (e) {
      status.textContent = "";
      rows.replaceChildren();
      status.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  action.addEventListener("change", () => void load(false));
  more.addEventListener("click", () => void load(true));
  main.replaceChildren(
    heading,
    h(
      "p",
      { class: "sub" },
      `Who changed what${org ? ` in ${org.name}` : ""}: tokens, members, settings, variables (names only), deployments, domains, rules, channels, servers.`,
    ),
    h("div", { class: "field" }, h("label", { for: "audit-action" }, "Action"), action),
    status,
    h("div", { class: "table-wrap audit-wrap" }, table),
    more,
  );
  await load(false);
}
