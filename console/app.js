// @ts-check
/**
 * The console's entry: who is signed in (GET /api/me), the shell (organization switcher,
 * sign-out), and a hash router: #/sign-in, #/projects, #/projects/new, #/projects/<id>, #/projects/<id>/deployments,
 * #/projects/<id>/requests, #/projects/<id>/rules, #/servers, #/settings, #/notifications, #/audit, #/members, #/tokens. Hash routes keep every page at `/`, so both runtimes serve one file.
 */
import { activeOrganization, api, ApiError, onSessionEnded, rememberOrganization } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { unseenBadge } from "./notifications-badge.js";
import { projectsPage } from "./projects.js";
import { signInPage } from "./sign-in.js";

/**
 * The other pages are fetched when first visited (index.html preloads only the shell, sign-in and
 * projects): a cold load of the console carries what its first page needs, not every page
 * (test/node/console-browser.test.ts holds it under 300 KB).
 * @type {Record<string, () => Promise<(view: HTMLElement, ctx: Ctx, id: string) => Promise<void>>>}
 */
const PAGES = {
  "projects/new": () => import("./project-new.js").then((m) => m.newProjectPage),
  "projects/:id": () => import("./project.js").then((m) => m.projectPage),
  "projects/:id/deployments": () => import("./deployments.js").then((m) => m.deploymentsPage),
  "projects/:id/requests": () => import("./request-logs.js").then((m) => m.requestLogsPage),
  "projects/:id/rules": () => import("./route-rules.js").then((m) => m.routeRulesPage),
  servers: () => import("./servers.js").then((m) => m.serversPage),
  settings: () => import("./settings.js").then((m) => m.settingsPage),
  notifications: () => import("./notifications.js").then((m) => m.notificationsPage),
  audit: () => import("./audit.js").then((m) => m.auditPage),
  members: () => import("./members.js").then((m) => m.membersPage),
  tokens: () => import("./tokens.js").then((m) => m.tokensPage),
};

/** The PAGES key of a hash's path. @param {string} page @param {string | undefined} id @param {string | undefined} sub */
function pageKey(page, id, sub) {
  if (page !== "projects" || !id) return page;
  if (id === "new") return "projects/new";
  return sub ? `projects/:id/${sub}` : "projects/:id";
}

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
        h("li", {}, link("servers", "Servers")),
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
  const key = pageKey(page, id, sub);
  const loader = PAGES[key];
  if (page === "projects" && !id) await projectsPage(view, ctx);
  else if (loader) {
    let render;
    try {
      render = await loader();
    } catch {
      // The module could not be fetched (a dropped connection, a new console deployed meanwhile).
      view.replaceChildren(
        h("h1", { tabindex: "-1" }, "Page not loaded"),
        h("p", { role: "alert" }, "This page could not be loaded. Check the connection, then reload."),
      );
      return focusMain();
    }
    if (view.isConnected) await render(view, ctx, decodeURIComponent(id ?? ""));
  } else {
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
