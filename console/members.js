// @ts-check
/**
 * Members of the active organization (GET /api/orgs/{orgId}/members: any member), with their
 * roles. With `org:admin`: change a role, remove a member (after a confirmation), invite an
 * e-mail address with a role, list and revoke open invitations (invitations.js). The rules the
 * API enforces are applied to what is offered: only an owner sees the owner role or controls on
 * an owner's row; your own row has none (another owner or admin changes it). The last owner's
 * demotion or removal (409) is shown on the row. Without `org:admin` the list is read-only.
 */
import { api } from "./api.js";
import { h, uid } from "./dom.js";
import { explain } from "./forms.js";
import { invitationsSection } from "./invitations.js";

/**
 * @typedef {{userId: string, email: string, name: string, role: string, joinedAt: string}} Member
 */

const ROLES = ["owner", "admin", "member", "viewer"];
const ROLE_WORDS = {
  owner: "every permission; manages owners",
  admin: "every permission",
  member: "everything but the admin permissions",
  viewer: "reads projects; own settings and notifications",
};

/** Every member, page by page (100 a page). @param {string} orgId @returns {Promise<Member[]>} */
async function allMembers(orgId) {
  /** @type {Member[]} */
  const out = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "100" });
    if (cursor) query.set("cursor", cursor);
    /** @type {{items: Member[], nextCursor: string | null}} */
    const page = await api("GET", `/orgs/${encodeURIComponent(orgId)}/members?${query}`);
    out.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 */
export async function membersPage(main, ctx) {
  document.title = "Members · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Members");
  const orgId = ctx.me.activeOrganizationId;
  const org = ctx.me.organizations.find((o) => o.id === orgId);
  if (!orgId) {
    main.replaceChildren(heading, h("p", { class: "note" }, "You belong to no organization: an owner or admin can invite you to one."));
    return;
  }
  const isAdmin = ctx.can("org:admin");
  const isOwner = ctx.role === "owner";
  const base = `/orgs/${encodeURIComponent(orgId)}`;
  // The count is rewritten by every reload; an action's outcome has its own line, so the reload
  // that follows the action does not erase the message before it is read.
  const count = h("span", {}, "Loading…");
  const outcome = h("span", {});
  const status = h("p", { role: "status" }, count, " ", outcome);
  const rows = h("tbody", {});
  const table = h(
    "table",
    { class: "members" },
    h("caption", { class: "visually-hidden" }, `Members of ${org?.name ?? "the organization"}`),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Member", "Role", "Joined", isAdmin ? "Actions" : null].filter(Boolean).map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );

  async function load() {
    try {
      const members = await allMembers(/** @type {string} */ (orgId));
      rows.replaceChildren(...members.map((m) => row(m)));
      count.textContent = `${members.length} member${members.length === 1 ? "" : "s"}.`;
    } catch (e) {
      rows.replaceChildren();
      count.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  /** @param {Member} m */
  function row(m) {
    const self = m.userId === ctx.me.user.id;
    const who = h("th", { scope: "row" }, m.name, self ? h("span", { class: "badge" }, "you") : null, h("span", { class: "sub" }, m.email));
    const cells = [who, h("td", {}, h("span", { class: `badge role-${m.role}` }, m.role)), h("td", {}, new Date(m.joinedAt).toLocaleDateString())];
    if (isAdmin) cells.push(h("td", { class: "row-actions" }, actionsFor(m, self)));
    return h("tr", { "data-user": m.userId }, cells);
  }

  /** @param {Member} m @param {boolean} self */
  function actionsFor(m, self) {
    if (self) return h("span", { class: "sub" }, "Another owner or admin changes your role.");
    if (m.role === "owner" && !isOwner) return h("span", { class: "sub" }, "Only an owner changes an owner.");
    const box = h("div", {});
    const select = h(
      "select",
      { id: uid("role"), name: "role" },
      ROLES.filter((r) => isOwner || r !== "owner").map((r) => h("option", { value: r, selected: r === m.role }, r)),
    );
    const save = h("button", { type: "button", class: "secondary small" }, "Change role", h("span", { class: "visually-hidden" }, ` of ${m.email}`));
    const remove = h("button", { type: "button", class: "secondary small" }, "Remove", h("span", { class: "visually-hidden" }, ` ${m.email}`));
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const fail = (/** @type {unknown} */ e) => {
      error.textContent = typeof e === "string" ? e : explain(e);
      error.hidden = false;
    };
    save.addEventListener("click", async () => {
      error.hidden = true;
      // A no-op change says so instead of sending it.
      if (select.value === m.role) return fail(`${m.email} is already ${m.role}: choose another role first.`);
      try {
        await api("PATCH", `${base}/members/${encodeURIComponent(m.userId)}`, { role: select.value });
        outcome.textContent = `${m.email} is now ${select.value}.`;
        await load();
        focusRow(m.userId, "select");
      } catch (e) {
        fail(e);
      }
    });
    remove.addEventListener("click", () => {
      error.hidden = true;
      const confirm = h("button", { type: "button", class: "small" }, "Remove", h("span", { class: "visually-hidden" }, ` ${m.email}`), " now");
      const cancel = h("button", { type: "button", class: "secondary small" }, "Keep");
      const question = h(
        "div",
        {},
        h("span", { class: "confirm-text" }, `Remove ${m.email}? They lose access at once; their tokens no longer act here.`),
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
          await api("DELETE", `${base}/members/${encodeURIComponent(m.userId)}`);
          outcome.textContent = `${m.email} was removed.`;
          await load();
          heading.focus();
        } catch (e) {
          question.replaceWith(controls);
          fail(e);
          remove.focus();
        }
      });
    });
    const label = h("label", { for: select.id, class: "visually-hidden" }, `Role of ${m.email}`);
    const controls = h("div", { class: "actions" }, label, select, save, remove);
    box.append(controls, error);
    return box;
  }

  /** @param {string} userId @param {string} selector */
  function focusRow(userId, selector) {
    /** @type {HTMLElement | null} */ (rows.querySelector(`tr[data-user="${CSS.escape(userId)}"] ${selector}`))?.focus();
  }

  /** @type {HTMLElement[]} */
  const children = [
    heading,
    h(
      "p",
      { class: "sub" },
      `Who belongs to ${org?.name ?? "this organization"} and with which role. Roles: ${ROLES.map((r) => `${r}: ${ROLE_WORDS[/** @type {keyof ROLE_WORDS} */ (r)]}`).join("; ")}.`,
    ),
    status,
    h("div", { class: "table-wrap" }, table),
  ];
  if (!isAdmin) {
    children.push(h("p", { class: "note" }, `Your role (${ctx.role ?? "none"}) does not include org:admin: an owner or admin changes roles and invites.`));
    main.replaceChildren(...children);
    await load();
    return;
  }
  // Only an owner may invite an owner: the role is not offered to an admin.
  const invitations = invitationsSection(
    base,
    ROLES.filter((r) => isOwner || r !== "owner"),
    isOwner,
  );
  children.push(invitations.section);
  main.replaceChildren(...children);
  await Promise.all([load(), invitations.load()]);
}
