// @ts-check
/**
 * The organization's build servers (GET /api/servers: every role): each one's status in words
 * (online, draining, offline), what its runner last reported (version, capacity, sandbox,
 * limits), its labels and public URL, what it runs and when it was last heard from. With
 * org:admin: register one (POST /api/servers; its runner token and the one command attaching the
 * machine shown once, once.js), and per server edit, drain or undrain, delete
 * (servers-manage.js). Without org:admin the list is read-only and says why.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain } from "./forms.js";
import { shownOnce } from "./once.js";
import { statusBadge } from "./projects.js";
import { serverFields } from "./servers-form.js";
import { serverActions } from "./servers-manage.js";

/**
 * @typedef {Record<string, string | number | boolean>} Facts
 * @typedef {{id: string, projectId: string, status: string}} RunningDeployment
 * @typedef {{id: string, name: string, labels: string[], publicUrl: string | null, status: "online" | "draining" | "offline",
 *   draining: boolean, tokenPrefix: string, version: string | null, capacity: number | null, sandbox: Facts | null,
 *   limits: Facts | null, lastSeenAt: string | null, running: RunningDeployment[], createdAt: string}} Server
 */

const NOT_REPORTED = "Not reported yet";

/**
 * The command that attaches a machine as the server: the token in the environment rather than
 * `--token`, since arguments show in `ps` (docs/servers.md).
 * @param {string} token
 */
export const attachCommand = (token) => `WORKSPACE_RUNNER_TOKEN=${token} wsp runner --api ${location.origin}`;

/** Every server, page by page (an organization has at most 100). @returns {Promise<Server[]>} */
async function allServers() {
  /** @type {Server[]} */
  const out = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "100" });
    if (cursor) query.set("cursor", cursor);
    /** @type {{items: Server[], nextCursor: string | null}} */
    const page = await api("GET", `/servers?${query}`);
    out.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

/** A runner's reported facts in words ("confined: yes, cgroups: v2"). @param {Facts | null} facts */
function factsText(facts) {
  if (!facts) return NOT_REPORTED;
  const entries = Object.entries(facts);
  if (entries.length === 0) return "None reported";
  return entries.map(([k, v]) => `${k}: ${v === true ? "yes" : v === false ? "no" : v}`).join(", ");
}

/** @param {string | null} at */
const heardFrom = (at) => (at ? h("time", { datetime: at }, new Date(at).toLocaleString()) : "Never");

/** What the server holds now: each deployment linked to its project's deployments page. @param {RunningDeployment[]} running */
function runningList(running) {
  if (running.length === 0) return "Nothing";
  return h(
    "ul",
    { class: "plain" },
    running.map((d) =>
      h("li", {}, h("a", { href: `#/projects/${encodeURIComponent(d.projectId)}/deployments` }, h("code", {}, d.id)), " ", statusBadge(d.status)),
    ),
  );
}

/**
 * A server's card: its name and status, its facts, and for admins its controls.
 * @param {Server} s
 * @param {import("./servers-manage.js").ManageHooks | null} manage
 */
function serverCard(s, manage) {
  /** @type {[string, unknown][]} */
  const facts = [
    ["Labels", s.labels.length ? s.labels.map((l) => h("code", { class: "scope" }, l)) : "None"],
    ["Public URL", s.publicUrl ?? "None"],
    ["Runs", runningList(s.running)],
    ["Last heard from", heardFrom(s.lastSeenAt)],
    ["Version", s.version ?? NOT_REPORTED],
    ["Capacity", s.capacity === null ? NOT_REPORTED : `${s.capacity} build${s.capacity === 1 ? "" : "s"} at once`],
    ["Sandbox", factsText(s.sandbox)],
    ["Limits", factsText(s.limits)],
    ["Runner token", h("code", {}, `${s.tokenPrefix}…`)],
  ];
  return h(
    "li",
    { class: "card server", "data-server": s.id },
    h(
      "div",
      { class: "server-head" },
      h("h3", {}, s.name),
      statusBadge(s.status),
      // Drained but not reporting reads "offline": say it is still set to take no work.
      s.draining && s.status === "offline" ? h("span", { class: "badge" }, "drained") : null,
    ),
    h(
      "dl",
      { class: "facts" },
      facts.map(([term, value]) => [h("dt", {}, term), h("dd", {}, /** @type {import("./dom.js").Child} */ (value))]),
    ),
    manage ? serverActions(s, manage) : null,
  );
}

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 */
export async function serversPage(main, ctx) {
  document.title = "Build servers · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Build servers");
  const isAdmin = ctx.can("org:admin");
  // The count is rewritten by every reload; an action's outcome has its own part, so the reload
  // that follows the action does not erase it before it is read.
  const count = h("span", {}, "Loading…");
  const outcome = h("span", {});
  const status = h("p", { role: "status" }, count, " ", outcome);
  const list = h("ul", { class: "plain servers" });
  const listHeading = h("h2", { id: "servers-heading", tabindex: "-1" }, "Servers");
  const empty = h(
    "p",
    { class: "note", hidden: true },
    isAdmin
      ? `No build server yet: register one below, then run the command shown with its token (WORKSPACE_RUNNER_TOKEN=wsr_… wsp runner --api ${location.origin}) on the machine to attach.`
      : `No build server yet: an owner or admin registers one, and its machine attaches with wsp runner --api ${location.origin} and the server's runner token.`,
  );

  /** @type {import("./servers-manage.js").ManageHooks} */
  const manage = {
    done: async (message, focus) => {
      // Announced once the list shows the change.
      await load();
      outcome.textContent = message;
      const target = focus && list.querySelector(`[data-server="${CSS.escape(focus.id)}"] button[data-action="${focus.action}"]`);
      /** @type {HTMLElement} */ (target || listHeading).focus();
    },
  };

  async function load() {
    try {
      const servers = await allServers();
      list.replaceChildren(...servers.map((s) => serverCard(s, isAdmin ? manage : null)));
      empty.hidden = servers.length > 0;
      count.textContent = servers.length === 0 ? "No servers." : `${servers.length} server${servers.length === 1 ? "" : "s"}.`;
    } catch (e) {
      list.replaceChildren();
      count.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  const intro = h(
    "p",
    { class: "sub" },
    "A build server is a machine running wsp runner: it pulls the deployments placed on it over HTTPS, builds and runs them in its sandbox, and reports back. " +
      "It is online while it reports (at least once a minute), draining when set to take no new work, offline otherwise.",
  );
  const listSection = h("section", { "aria-labelledby": "servers-heading" }, listHeading, status, empty, list);
  if (!isAdmin) {
    const why = h(
      "p",
      { class: "note" },
      `Read-only: your role (${ctx.role ?? "none"}) does not include org:admin, which registering, changing, draining and deleting servers need; an owner or admin can.`,
    );
    main.replaceChildren(heading, intro, why, listSection);
    await load();
    return;
  }
  main.replaceChildren(heading, intro, listSection, registerSection(load, outcome));
  await load();
}

/**
 * The register form; the created server's token and attach command shown once under it.
 * @param {() => Promise<void>} reload
 * @param {HTMLElement} outcome the list's outcome line
 */
function registerSection(reload, outcome) {
  const fields = serverFields();
  const shown = h("div", {});
  const submit = h("button", { type: "submit" }, "Register server");
  const form = h("form", { novalidate: true, "aria-labelledby": "register-heading" }, fields.element, h("div", { class: "actions" }, submit));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    shown.replaceChildren();
    submit.disabled = true;
    try {
      /** @type {Server & {token: string}} */
      const created = await api("POST", "/servers", fields.body());
      for (const input of [fields.name, fields.labels, fields.publicUrl]) input.value = "";
      const card = shownOnce(
        `Runner token of ${created.name}`,
        [
          { label: "Runner token", value: created.token, hint: "It works on the runner protocol only, for this server of this organization." },
          {
            label: "Command to attach",
            value: attachCommand(created.token),
            multiline: true,
            hint: "Run it on the machine (Linux with bubblewrap, and this package installed: wsp is its command). Add --edge-port <port> to serve its apps where the public URL leads. The server is offline until the runner first reports.",
          },
        ],
        () => fields.name.focus(),
      );
      shown.replaceChildren(card);
      await reload();
      outcome.textContent = `${created.name} was registered.`;
      card.focus();
    } catch (e) {
      fields.showError(form, e);
    } finally {
      submit.disabled = false;
    }
  });
  return h("section", { "aria-labelledby": "register-heading" }, h("h2", { id: "register-heading" }, "Register a server"), form, shown);
}
