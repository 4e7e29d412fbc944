// @ts-check
/**
 * Invitations of the active organization, for `org:admin` (the Members page shows this section):
 * invite an e-mail address with a role (POST /api/orgs/{orgId}/invitations: the code is shown
 * once, with the command that accepts it), the open invitations (GET …/invitations: neither
 * accepted nor expired; the API never answers a code again) and revoking one after a confirmation
 * (DELETE …/invitations/{id}), so a code sent to the wrong address stops working at once.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showProblem } from "./forms.js";
import { shownOnce } from "./once.js";

/**
 * @typedef {{id: string, email: string, role: string, invitedBy: {userId: string, email: string} | null, createdAt: string, expiresAt: string}} Pending
 */

/** Every open invitation, page by page (100 a page). @param {string} base @returns {Promise<Pending[]>} */
async function allPending(base) {
  /** @type {Pending[]} */
  const out = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "100" });
    if (cursor) query.set("cursor", cursor);
    /** @type {{items: Pending[], nextCursor: string | null}} */
    const page = await api("GET", `${base}/invitations?${query}`);
    out.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

/**
 * @param {string} base `/orgs/{orgId}`
 * @param {string[]} roles the roles the caller may invite with
 * @param {boolean} isOwner
 * @returns {{section: HTMLElement, load: () => Promise<void>}}
 */
export function invitationsSection(base, roles, isOwner) {
  const status = h("p", { role: "status" }, "Loading…");
  const rows = h("tbody", {});
  const table = h(
    "table",
    { class: "invitations" },
    h("caption", { class: "visually-hidden" }, "Open invitations, oldest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Invited", "Role", "Invited by", "Expires", "Actions"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );
  const wrap = h("div", { class: "table-wrap" }, table);

  async function load() {
    try {
      const open = await allPending(base);
      rows.replaceChildren(...open.map(row));
      wrap.hidden = open.length === 0;
      status.textContent = open.length === 0 ? "No open invitations." : `${open.length} open invitation${open.length === 1 ? "" : "s"}.`;
    } catch (e) {
      rows.replaceChildren();
      status.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  /** @param {Pending} inv */
  function row(inv) {
    const revoke = h(
      "button",
      { type: "button", class: "secondary small" },
      "Revoke",
      h("span", { class: "visually-hidden" }, ` the invitation for ${inv.email}`),
    );
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const controls = h("div", { class: "actions" }, revoke);
    revoke.addEventListener("click", () => {
      error.hidden = true;
      const confirm = h(
        "button",
        { type: "button", class: "small" },
        "Revoke",
        h("span", { class: "visually-hidden" }, ` the invitation for ${inv.email}`),
        " now",
      );
      const cancel = h("button", { type: "button", class: "secondary small" }, "Keep");
      const question = h(
        "div",
        {},
        h("span", { class: "confirm-text" }, `Revoke it? Its code stops working at once; ${inv.email} can be invited again.`),
        h("div", { class: "actions" }, confirm, cancel),
      );
      controls.replaceWith(question);
      confirm.focus();
      cancel.addEventListener("click", () => {
        question.replaceWith(controls);
        revoke.focus();
      });
      confirm.addEventListener("click", async () => {
        try {
          await api("DELETE", `${base}/invitations/${encodeURIComponent(inv.id)}`);
          await load();
          status.textContent = `The invitation for ${inv.email} was revoked. ${status.textContent}`;
          email.focus();
        } catch (e) {
          question.replaceWith(controls);
          error.textContent = explain(e);
          error.hidden = false;
          revoke.focus();
        }
      });
    });
    return h(
      "tr",
      { "data-invitation": inv.id },
      h("th", { scope: "row" }, inv.email, h("span", { class: "sub" }, new Date(inv.createdAt).toLocaleString())),
      h("td", {}, h("span", { class: `badge role-${inv.role}` }, inv.role)),
      h("td", {}, inv.invitedBy?.email ?? "a deleted account"),
      h("td", {}, new Date(inv.expiresAt).toLocaleString()),
      h("td", { class: "row-actions" }, controls, error),
    );
  }

  const email = h("input", { type: "email", name: "email", required: true, maxlength: "320", autocomplete: "off" });
  const role = h(
    "select",
    { name: "role" },
    roles.map((r) => h("option", { value: r, selected: r === "member" }, r)),
  );
  const shown = h("div", {});
  const form = h(
    "form",
    { novalidate: true },
    field("E-mail address", email),
    field("Role", role, isOwner ? undefined : "Only an owner can invite an owner."),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Create invitation")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    shown.replaceChildren();
    try {
      /** @type {{id: string, email: string, role: string, code: string, expiresAt: string}} */
      const inv = await api("POST", `${base}/invitations`, { email: email.value.trim(), role: role.value });
      email.value = "";
      const accept = `curl -X POST ${location.origin}/api/invitations/accept -H 'content-type: application/json' -d '{"code": "${inv.code}", "name": "Your name"}'`;
      const card = shownOnce(
        `Invitation for ${inv.email} (${inv.role})`,
        [
          { label: "Invitation code", value: inv.code, hint: `Send it to ${inv.email}; it works once, until ${new Date(inv.expiresAt).toLocaleString()}.` },
          {
            label: "Command to accept",
            value: accept,
            multiline: true,
            hint: "Without an account it creates one and answers its first token; with an account, add that user's token as Authorization: Bearer.",
          },
        ],
        () => email.focus(),
      );
      shown.replaceChildren(card);
      card.focus();
      await load();
    } catch (e) {
      showProblem(form, e);
    }
  });

  const section = h(
    "section",
    { "aria-labelledby": "invitations-heading" },
    h("h2", { id: "invitations-heading" }, "Invitations"),
    status,
    wrap,
    h("h3", {}, "Invite someone"),
    form,
    shown,
  );
  return { section, load };
}
