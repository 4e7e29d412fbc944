// @ts-check
/**
 * The project page's overview, saying what is true now rather than what was last recorded:
 * - the status from the production environment's current deployment (functions/projects/status.ts):
 *   only `live` is green; `degraded` (the app does not answer now) and `crashed` say why;
 * - the app's address as a link, with the free route's state in words. The stored state is
 *   `pending` until a sync asked the edge; for a user with project:write a `pending` route is
 *   checked once against the edge (POST …/routing/retry, which records what the edge serves), so
 *   a route the edge serves does not read "pending" forever;
 * - the current deployment, the one serving production (GET …/info `runtime.serving`), and the
 *   latest deployment (`build.lastDeployment`) apart: a failed latest build does not hide the one
 *   still serving.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { statusBadge } from "./projects.js";

/** @typedef {{id: string, status: string, commitSha: string | null, createdAt: string, finishedAt: string | null}} DeploymentRef */

const STATUS_WORDS = {
  created: "Nothing is deployed yet.",
  live: "The app answers.",
  degraded: "The app does not answer now.",
  crashed: "The app is stopped: it kept crashing or could not start.",
  disabled: "Deploys are paused and every route is offline.",
};

const ROUTE_WORDS = {
  synced: "routed to this project by the edge",
  pending: "not confirmed as served yet",
  offline: "offline while the project is disabled",
};

const when = (/** @type {string} */ at) => new Date(at).toLocaleString();

/** Where the app answers: its hostname on this console's scheme and port (a self-hosted edge serves apps on the API's listener). @param {string} hostname */
export const appUrl = (hostname) => `${location.protocol}//${hostname}${location.port ? `:${location.port}` : ""}`;

/** The source line: where the next deployment takes its source from. @param {any} source */
export function sourceText(source) {
  if (!source || source.kind === "none") return "No source yet";
  if (source.kind === "git" && source.repository) {
    const r = source.repository;
    const host = { github: "GitHub", gitlab: "GitLab", bitbucket: "Bitbucket" }[/** @type {string} */ (r.provider)] ?? r.provider;
    return `${host} ${r.owner}/${r.repo}${r.branch ? `, branch ${r.branch}` : ", default branch"}`;
  }
  if (source.kind === "upload") return "Uploaded folders";
  if (source.kind === "local") return `Local folder ${source.localPath ?? ""}`.trim();
  return String(source.kind);
}

/** @param {string} projectId @param {DeploymentRef} d */
const deploymentLine = (projectId, d) => [
  h("a", { href: `#/projects/${encodeURIComponent(projectId)}/deployments` }, h("code", {}, d.id)),
  " ",
  statusBadge(d.status),
  d.commitSha ? [" commit ", h("code", {}, d.commitSha.slice(0, 7))] : null,
  h("span", { class: "sub" }, `${d.finishedAt ? "finished" : "queued"} ${when(d.finishedAt ?? d.createdAt)}`),
];

/** Why the latest deployment is not the one serving, in words. @param {DeploymentRef} latest @param {boolean} serving */
function latestNote(latest, serving) {
  if (["queued", "building", "deploying"].includes(latest.status))
    return serving ? "In progress; the current deployment serves until it is ready." : "In progress.";
  if (latest.status === "failed" || latest.status === "canceled")
    return serving ? "It did not go live; the current deployment keeps serving." : "It did not go live.";
  return "Not serving production (a preview, or replaced since).";
}

/**
 * @param {any} p the project (GET /api/projects/{id})
 * @param {boolean} canWrite
 */
export function overviewSection(p, canWrite) {
  const free = p.routes.free;
  /** @param {string} term @param {import("./dom.js").Child} value */
  const item = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
  const routeState = h("span", { class: "sub" }, ROUTE_WORDS[/** @type {keyof typeof ROUTE_WORDS} */ (free.state)] ?? free.state);
  const serving = h("dd", {}, "Loading…");
  const latest = h("dd", {}, "Loading…");
  const section = h(
    "section",
    { "aria-labelledby": "overview-heading" },
    h("h2", { id: "overview-heading" }, "Status and domains"),
    h(
      "dl",
      { class: "facts" },
      item("Status", [
        statusBadge(p.status),
        " ",
        STATUS_WORDS[/** @type {keyof typeof STATUS_WORDS} */ (p.status)] ?? "",
        p.asleep ? " Asleep: the next request wakes it." : "",
        p.statusReason ? h("p", { class: "status-reason" }, p.statusReason) : null,
      ]),
      item("App", [h("a", { href: appUrl(free.hostname), rel: "noreferrer" }, appUrl(free.hostname)), " ", routeState]),
      h("dt", {}, "Current deployment"),
      serving,
      h("dt", {}, "Latest deployment"),
      latest,
      p.needsRedeploy ? item("Changes", `Changed since the serving deployment: ${p.changes.join(", ")}. Deploy again to apply them.`) : null,
      item("Source", sourceText(p.source)),
      item("Location", p.location),
      item(
        "Domains",
        p.routes.domains.length === 0
          ? "none connected"
          : h(
              "ul",
              { class: "plain" },
              p.routes.domains.map((/** @type {any} */ d) => h("li", {}, d.hostname, d.primary ? h("span", { class: "badge" }, "primary") : null)),
            ),
      ),
    ),
  );

  void api("GET", `/projects/${encodeURIComponent(p.id)}/info`).then(
    (info) => {
      /** @type {DeploymentRef | null} */
      const now = info.runtime.serving;
      /** @type {DeploymentRef | null} */
      const last = info.build.lastDeployment;
      serving.replaceChildren(now ? h("span", {}, deploymentLine(p.id, now)) : "none: no deployment has gone live yet");
      if (!last) latest.replaceChildren("none yet");
      else if (now && last.id === now.id) latest.replaceChildren("the current one");
      else latest.replaceChildren(h("span", {}, deploymentLine(p.id, last)), h("p", { class: "status-reason" }, latestNote(last, !!now)));
    },
    (e) => {
      serving.replaceChildren(explain(e));
      latest.replaceChildren(p.latestDeployment ? `${p.latestDeployment.status} · ${when(p.latestDeployment.createdAt)}` : "none yet");
    },
  );

  // Asked of the edge once, by someone allowed to record the answer: see the module comment.
  if (free.state === "pending" && canWrite && !p.disabledAt) {
    void api("POST", `/projects/${encodeURIComponent(p.id)}/routing/retry`).then(
      (after) => {
        routeState.textContent = ROUTE_WORDS[/** @type {keyof typeof ROUTE_WORDS} */ (after.state)] ?? after.state;
      },
      () => {
        // The stored state stays on screen: it is what the API last knew.
      },
    );
  }
  return section;
}
