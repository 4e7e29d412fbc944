// @ts-check
/**
 * The console's entry: who is signed in (GET /api/me), the shell (organization switcher,
 * sign-out), and a hash router: #/sign-in, #/projects, #/projects/<id>, #/projects/<id>/deployments, #/settings,
 * #/notifications, #/audit, #/members, #/tokens. Hash routes keep every page at `/`, so both runtimes serve one file.
 */
import { activeOrganization, api, ApiError, onSessionEnded, rememberOrganization } from "./api.js";
import { auditPage } from "./audit.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { membersPage } from "./members.js";
import { deploymentsPage } from "./deployments.js";
import { notificationsPage } from "./notifications.js";
import { unseenBadge } from "./notifications-badge.js";
import { projectPage } from "./project.js";
import { projectsPage } from "./projects.js";
import { settingsPage } from "./settings.js";
import { signInPage } from "./sign-in.js";
import { tokensPage } from "./tokens.js";

/**
 * @typedef {{id: string, name: string, role: string}} Organization
 * @typedef {{user: {id: string, email: string, name: string}, organizations: Organization[], activeOrganizationId: string | null, tags: string[]}} Me
 * @typedef {{me: Me, role: string | undefined, can: (tag: string) => boolean}} Ctx
 */

const header = /** @type {HTMLElement} */ (document.getElementById("shell"));
const main = /** @type {HTMLElement} */ (document.getElementById("main"));

/** @type {Me | null} */
let me = null;
/** Where to go after signing in (the page asked for before). */
let returnTo = "#/projects";

async function loadMe() {
  try {
    me = await api("GET", "/me");
  } catch (e) {
    // A remembered organization the user has left: forget it and ask again for the default one.
    if (e instanceof ApiError && e.status === 403 && activeOrganization()) {
      rememberOrganization(null);
      me = await api("GET", "/me");
    } else throw e;
  }
  return /** @type {Me} */ (me);
}

/** @param {Me} who @returns {Ctx} */
function contextOf(who) {
  const role = who.organizations.find((o) => o.id === who.activeOrganizationId)?.role;
  return { me: who, role, can: (tag) => who.tags.includes(tag) };
}

/** @param {string} hash */
function go(hash) {
  if (location.hash === hash) void route();
  else location.hash = hash;
}

/** @param {Me} who */
function renderShell(who) {
  const org = h(
    "select",
    {
      id: "org-switcher",
      onchange: async () => {
        rememberOrganization(org.value);
        me = null;
        go("#/projects");
      },
    },
    who.organizations.map((o) => h("option", { value: o.id, selected: o.id === who.activeOrganizationId }, `${o.name} (${o.role})`)),
  );
  const current = location.hash.split("/")[1] || "projects";
  /** @param {string} target @param {string} text @param {HTMLElement | null} [badge] */
  const link = (target, text, badge) => h("a", { href: `#/${target}`, "aria-current": current === target ? "page" : undefined }, text, badge);
  header.replaceChildren(
    h("a", { class: "brand", href: "#/projects" }, "Workspace"),
    h(
      "nav",
      { "aria-label": "Console" },
      h(
        "ul",
        {},
        h("li", {}, link("projects", "Projects")),
        h("li", {}, link("members", "Members")),
        h("li", {}, link("tokens", "Tokens")),
        h("li", {}, link("settings", "Settings")),
        h("li", {}, link("notifications", "Notifications", unseenBadge(who.tags.includes("notifications:read")))),
        who.tags.includes("org:admin") ? h("li", {}, link("audit", "Audit log")) : null,
        // The server's own interactive reference (functions/docs.ts), outside the console's hash routes.
        h("li", {}, h("a", { href: "/api/docs" }, "API reference")),
      ),
    ),
    h(
      "div",
      { class: "who" },
      h("label", { for: "org-switcher" }, "Organization"),
      org,
      h("span", { class: "email" }, who.user.email),
      h("button", { type: "button", class: "secondary", onclick: signOut }, "Sign out"),
    ),
  );
  header.hidden = false;
}

async function signOut() {
  try {
    await api("POST", "/auth/logout");
  } catch {
    // Already ended: signed out either way.
  }
  me = null;
  go("#/sign-in");
}

async function route() {
  const [, page = "projects", id, sub] = location.hash.replace(/^#/, "").split("/");
  if (page === "sign-in") {
    header.hidden = true;
    header.replaceChildren();
    signInPage(main, {
      signedIn: async () => {
        me = null;
        go(returnTo);
      },
    });
    return focusMain();
  }
  let who = me;
  if (!who) {
    main.replaceChildren(h("p", { role: "status" }, "Loading…"));
    try {
      who = await loadMe();
    } catch (e) {
      // Not signed in: the api module's session-ended handler has already gone to the sign-in page.
      if (e instanceof ApiError && e.status === 401) return;
      main.replaceChildren(h("h1", {}, "The console could not start"), h("p", { role: "alert" }, explain(e)));
      return;
    }
  }
  renderShell(who);
  const ctx = contextOf(who);
  // Each page renders into its own element: a slower earlier page that finishes late writes into a detached one.
  const view = h("div", { class: "view" });
  main.replaceChildren(view);
  if (page === "projects" && id && sub === "deployments") await deploymentsPage(view, ctx, decodeURIComponent(id));
  else if (page === "projects" && id) await projectPage(view, ctx, decodeURIComponent(id));
  else if (page === "projects") await projectsPage(view, ctx);
  else if (page === "settings") await settingsPage(view, ctx);
  else if (page === "notifications") await notificationsPage(view, ctx);
  else if (page === "audit") await auditPage(view, ctx);
  else if (page === "members") await membersPage(view, ctx);
  else if (page === "tokens") await tokensPage(view, ctx);
  else {
    document.title = "Not found · Workspace";
    view.replaceChildren(h("h1", { tabindex: "-1" }, "Page not found"), h("p", {}, h("a", { href: "#/projects" }, "Go to projects")));
  }
  if (!view.isConnected) return;
  focusMain();
  // For the load-time figures (test/node/console-browser.test.ts): when this page's content was on screen.
  performance.mark(`rendered ${page}`);
}

/** Moves focus to the new page's heading, so keyboard and screen-reader users start there. */
function focusMain() {
  const heading = /** @type {HTMLElement | null} */ (main.querySelector("h1"));
  heading?.focus({ preventScroll: true });
}

onSessionEnded(() => {
  me = null;
  if (!location.hash.startsWith("#/sign-in")) {
    returnTo = location.hash || "#/projects";
    go("#/sign-in");
  }
});
window.addEventListener("hashchange", () => void route());
void route();
