// @ts-check
/**
 * A project's deployments (GET /api/projects/{id}/deployments, newest first), a Deploy
 * button (POST /api/deployments, project:write: a role without it sees the reason instead),
 * the chosen deployment's build log followed live until its `end` event, and the project's
 * runtime logs live (the newest lines first read as a page, then the stream after the last
 * of them, so nothing is missed or shown twice), each line labelled with its environment and
 * deployment, narrowed to one environment by a filter. Streams stop when the page is left.
 * With project:write each row can also be canceled or promoted (deployments-actions.js). A queued
 * deployment waiting for a build server says why beside its status (deployments-waiting.js).
 */
import { projectSubpage } from "./project-subpage.js";
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showProblem } from "./forms.js";
import { rowActions } from "./deployments-actions.js";
import { logRegion, withoutEscapes } from "./deployments-log.js";
import { followStream } from "./deployments-stream.js";
import { waitingNote, waitingWords } from "./deployments-waiting.js";
import { statusBadge } from "./projects.js";

/** Deployments a page of the list shows. */
const PAGE = 20;
/** Runtime lines read before following the stream. */
const RUNTIME_BACKLOG = 200;

/**
 * @typedef {{id: string, projectId: string, environment: string, status: string, current: boolean, source: string,
 *   gitOwner: string | null, gitRepo: string | null, branch: string | null, commitSha: string | null,
 *   failureReason: string | null, createdAt: string, finishedAt: string | null, crashedAt: string | null, prunedAt: string | null,
 *   serverLabels?: string[], waitingFor?: string | null, waitingMessage?: string | null}} Deployment
 */

/** @param {HTMLElement} main @param {import("./app.js").Ctx} ctx @param {string} projectId */
export async function deploymentsPage(main, ctx, projectId) {
  const frame = projectSubpage(main, projectId, "Deployments");
  const { base, heading, back } = frame;

  /** Open streams, closed when the page is left (another route replaces this view). */
  const streams = new Set(/** @type {{close: () => void}[]} */ ([]));
  const alive = () => main.isConnected;
  const leave = () => {
    if (alive()) return;
    for (const s of streams) s.close();
    streams.clear();
    window.removeEventListener("hashchange", onLeave);
  };
  // The route renders the next page after hashchange: check once it has.
  const onLeave = () => setTimeout(leave, 0);
  window.addEventListener("hashchange", onLeave);

  if (!ctx.can("project:deployment:list")) {
    main.replaceChildren(
      back,
      heading,
      h("p", { class: "note" }, `Your role (${ctx.role ?? "none"}) in this organization cannot list deployments (it needs project:deployment:list).`),
    );
    return;
  }
  const project = await frame.load();
  if (!project) return;

  const environments = await readEnvironments(base);
  if (!alive()) return;
  const build = logRegion({ id: "build-log", title: "Build log", hint: "Times in UTC. Followed live until the build finishes." });
  build.setStatus("Choose a deployment to see its build log.");
  const filter = environmentFilter(environments);
  const runtime = logRegion({
    id: "runtime-log",
    title: "Runtime logs",
    hint: "The project's apps (stdout, stderr) and the runner's system lines, each labelled with its environment and deployment. Times in UTC.",
    labelled: true,
    tools: filter.element,
  });

  /** @type {{id: string, close: () => void} | null} */
  let following = null;
  const canWrite = ctx.can("project:write");
  const history = historySection(base, {
    canWrite,
    onChoose: (d) => chooseBuild(d),
    isChosen: (id) => following?.id === id,
  });

  /** Follows `d`'s build log from its first line (the stream starts there) until its end event. @param {Deployment} d */
  const chooseBuild = (d) => {
    if (following) {
      streams.delete(following);
      following.close();
    }
    build.clear();
    build.heading.textContent = `Build log of ${d.id}`;
    const stream = followStream(`/deployments/${encodeURIComponent(d.id)}/logs/stream`, {
      alive,
      onLines: (lines) => build.append(lines),
      onState: (state, detail) => build.setStatus(streamState(state, detail, "build log")),
      onEnd: (end) => {
        build.setStatus(
          end.failureReason ? `Build finished: ${end.status}. ${withoutEscapes(end.failureReason)}` : `Build finished: ${end.status}. The stream has ended.`,
          end.status === "ready" ? "ok" : "error",
        );
        // Its row may still show the state it had when the list was read.
        void history.reload();
      },
      onFail: (e) => build.setStatus(`The build log could not be read: ${explain(e)}`, "error"),
    });
    following = { id: d.id, close: stream.close };
    streams.add(following);
    history.markChosen(d.id);
  };

  const deploy = canWrite
    ? deploySection(projectId, environments, async (d) => {
        await history.reload();
        chooseBuild(d);
      })
    : h(
        "section",
        { "aria-labelledby": "deploy-heading" },
        h("h2", { id: "deploy-heading" }, "Deploy"),
        h(
          "p",
          { class: "note", id: "deploy-read-only" },
          `You cannot deploy, cancel or promote: your role in this organization is ${ctx.role ?? "unknown"}, which does not include project:write. A member, admin or owner can.`,
        ),
      );
  if (!alive()) return;
  main.replaceChildren(back, heading, deploy, history.element, build.element, runtime.element);

  const first = await history.reload();
  if (!alive()) return;
  if (first) chooseBuild(first);
  if (ctx.can("project:read")) await followRuntime(base, runtime, filter.select, streams, alive);
  else {
    filter.select.disabled = true;
    runtime.setStatus(`Your role (${ctx.role ?? "none"}) cannot read runtime logs (it needs project:read).`, "error");
  }
}

/**
 * @param {import("./deployments-stream.js").StreamState} state
 * @param {string | undefined} detail
 * @param {string} what
 */
function streamState(state, detail, what) {
  if (state === "connecting") return `Connecting to the ${what}…`;
  if (state === "live") return `Following the ${what} live.`;
  return `Connection lost; reconnecting${detail ? ` (${detail})` : ""}. Lines already shown stay.`;
}

/**
 * The newest runtime lines of the environment chosen in `filter` (all when none), then the stream
 * after the last of them. Choosing another environment closes the stream, clears the region and
 * reads again with `?environment=` on both, so live lines are narrowed by the API as the page is.
 * @param {string} base
 * @param {import("./deployments-log.js").LogRegion} region
 * @param {HTMLSelectElement} filter
 * @param {Set<{close: () => void}>} streams
 * @param {() => boolean} alive
 */
async function followRuntime(base, region, filter, streams, alive) {
  /** @type {{close: () => void} | null} */
  let stream = null;
  /** Bumped by each choice: a page still loading for an earlier one is dropped, its stream stops. */
  let generation = 0;
  const load = async () => {
    const mine = ++generation;
    const current = () => alive() && mine === generation;
    if (stream) {
      streams.delete(stream);
      stream.close();
      stream = null;
    }
    region.clear();
    const environment = filter.value;
    const what = environment ? `runtime logs of ${environment}` : "runtime logs";
    const narrowed = environment ? `?${new URLSearchParams({ environment })}` : "";
    region.setStatus("Loading the newest lines…");
    let lastEventId;
    try {
      const query = new URLSearchParams({ limit: String(RUNTIME_BACKLOG) });
      if (environment) query.set("environment", environment);
      const page = await api("GET", `${base}/logs?${query}`);
      if (!current()) return;
      region.append(page.items);
      // No runtime line yet: every one the stream finds after 0 is new.
      lastEventId = page.items.at(-1)?.id ?? "0";
    } catch (e) {
      if (current()) region.setStatus(`The ${what} could not be read: ${explain(e)}`, "error");
      return;
    }
    stream = followStream(`${base}/logs/stream${narrowed}`, {
      lastEventId,
      alive: current,
      onLines: (lines) => region.append(lines),
      onState: (state, detail) => region.setStatus(streamState(state, detail, what)),
      onFail: (e) => region.setStatus(`The ${what} stream stopped: ${explain(e)}`, "error"),
    });
    streams.add(stream);
  };
  filter.addEventListener("change", () => void load());
  await load();
}

/**
 * @typedef {{name: string, kind: "production" | "preview", branch: string | null}} Environment
 * @typedef {{items: Environment[], error: unknown}} Environments
 */

/**
 * The project's environments, read once for the deploy form and the runtime filter; a failure is
 * shown by each where it is used.
 * @param {string} base
 * @returns {Promise<Environments>}
 */
async function readEnvironments(base) {
  try {
    return { items: (await api("GET", `${base}/environments?limit=100`)).items, error: null };
  } catch (error) {
    return { items: [], error };
  }
}

/**
 * The runtime logs' environment filter: "All environments", then each environment by name (the
 * name its lines' labels show).
 * @param {Environments} environments
 */
function environmentFilter(environments) {
  const select = h(
    "select",
    { name: "runtime-environment" },
    h("option", { value: "" }, "All environments"),
    environments.items.map((e) => h("option", { value: e.name }, e.name)),
  );
  const element = field("Show lines from", select, environments.error ? `The environments could not be read: ${explain(environments.error)}` : undefined);
  element.classList.add("inline", "log-filter");
  return { element, select };
}

/**
 * The deploy form: an environment (production unless another is chosen) and the button.
 * @param {string} projectId
 * @param {Environments} environments
 * @param {(d: Deployment) => Promise<void>} queued
 */
function deploySection(projectId, environments, queued) {
  const environment = h("select", { name: "environment" });
  const done = h("p", { role: "status", class: "saved" });
  const button = h("button", { type: "submit" }, "Deploy");
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "deploy-heading" },
    h("div", { class: "deploy-row" }, field("Environment", environment), button),
    done,
  );
  for (const e of environments.items)
    environment.append(h("option", { value: e.name }, e.kind === "production" ? `${e.name} (production)` : `${e.name} (preview of ${e.branch})`));
  if (environments.error) {
    environment.append(h("option", { value: "production" }, "production"));
    showProblem(form, environments.error);
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    done.textContent = "";
    button.disabled = true;
    try {
      /** @type {Deployment} */
      const d = await api("POST", "/deployments", { projectId, environment: environment.value || undefined });
      const waiting = waitingWords(d);
      done.textContent = `Queued ${d.id} (${d.environment})${waiting ? `. ${waiting}` : "; its build log follows below."}`;
      await queued(d);
    } catch (e) {
      showProblem(form, e);
    } finally {
      button.disabled = false;
    }
  });
  return h(
    "section",
    { "aria-labelledby": "deploy-heading" },
    h("h2", { id: "deploy-heading" }, "Deploy"),
    h("p", { class: "sub" }, "Queues a deployment of the project's source: the branch head of a linked repository, or the last uploaded folder."),
    form,
  );
}

/**
 * @typedef {{canWrite: boolean, onChoose: (d: Deployment) => void, isChosen: (id: string) => boolean}} HistoryOptions
 */

/**
 * The list, newest first, with "Show older" paging; each row's button chooses its build log,
 * and with project:write its Cancel or Promote acts on it (the list is read again after either).
 * @param {string} base
 * @param {HistoryOptions} opts
 */
function historySection(base, opts) {
  const body = h("tbody");
  const status = h("p", { role: "status", class: "sub" });
  const more = h("button", { type: "button", class: "secondary" }, "Show older deployments");
  more.hidden = true;
  const refresh = h("button", { type: "button", class: "secondary" }, "Refresh");
  const table = h(
    "table",
    { class: opts.canWrite ? "deployments with-actions" : "deployments" },
    h("caption", { class: "visually-hidden" }, "Deployments, newest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Deployment", "Status", "Environment", "Source", "Created", "Finished", "Build log", opts.canWrite ? "Actions" : null]
          .filter((t) => t !== null)
          .map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    body,
  );
  const element = h(
    "section",
    { "aria-labelledby": "history-heading" },
    h("h2", { id: "history-heading", tabindex: "-1" }, "History"),
    status,
    // Focusable and named: at phone width it scrolls sideways, and the keyboard must reach that too.
    h("div", { class: "table-wrap deployments-wrap", tabindex: "0", role: "region", "aria-labelledby": "history-heading" }, table),
    h("div", { class: "actions" }, more, refresh),
  );
  /** @type {string | null} */
  let cursor = null;
  /** The last refusal of an action per deployment, shown on its row until the next action or Refresh. */
  const refusals = new Map(/** @type {[string, string][]} */ ([]));

  /** After an action, focus goes back to the row it was on (its buttons were rebuilt), else to the heading. @param {string} id */
  const focusRow = (id) => {
    const target = /** @type {HTMLElement | null} */ (body.querySelector(`button[data-id="${CSS.escape(id)}"]`) ?? element.querySelector("h2"));
    target?.focus();
  };
  /** @type {import("./deployments-actions.js").ActionHooks["done"]} */
  const done = async (d, message) => {
    refusals.delete(d.id);
    await reload();
    status.textContent = message;
    focusRow(d.id);
  };
  /** @type {import("./deployments-actions.js").ActionHooks["refused"]} */
  const refused = async (d, message) => {
    refusals.set(d.id, message);
    // The row shows the state that made the API refuse (it may have moved on since the list was read).
    await reload();
    focusRow(d.id);
  };

  /** @param {Deployment[]} items */
  const addRows = (items) => {
    for (const d of items) body.append(...rows(d, opts, opts.canWrite ? rowActions(d, { error: refusals.get(d.id), done, refused }) : null));
  };
  /** @param {string | null} from */
  const load = async (from) => {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (from) query.set("cursor", from);
    const page = await api("GET", `${base}/deployments?${query}`);
    cursor = page.nextCursor;
    more.hidden = !cursor;
    return /** @type {Deployment[]} */ (page.items);
  };

  const LOADING = "Loading deployments…";
  const EMPTY = "No deployments yet.";
  /**
   * Reads the first page again (rows replaced); resolves to the newest deployment. An action's outcome
   * ("… canceled.") stays: a reload the build-log stream's end starts at the same moment must not wipe it.
   */
  const reload = async () => {
    if (!status.textContent) status.textContent = LOADING;
    try {
      const items = await load(null);
      // A reload in the background (the build's end) keeps the keyboard where it was: on the same row.
      const focused = document.activeElement?.closest("tr")?.getAttribute("data-deployment");
      body.replaceChildren();
      addRows(items);
      if (focused) {
        const again = /** @type {HTMLElement | null} */ (body.querySelector(`button[data-id="${CSS.escape(focused)}"]`));
        again?.focus();
      }
      if (items.length === 0) status.textContent = EMPTY;
      else if (status.textContent === LOADING || status.textContent === EMPTY) status.textContent = "";
      return items[0];
    } catch (e) {
      status.textContent = explain(e);
      return undefined;
    }
  };
  more.addEventListener("click", async () => {
    try {
      addRows(await load(cursor));
    } catch (e) {
      status.textContent = explain(e);
    }
  });
  refresh.addEventListener("click", () => {
    refusals.clear();
    status.textContent = "";
    void reload();
  });

  return {
    element,
    reload,
    /** @param {string} id */
    markChosen(id) {
      for (const b of Array.from(body.querySelectorAll("button[data-id]"))) b.setAttribute("aria-pressed", String(b.getAttribute("data-id") === id));
    },
  };
}

/**
 * A deployment's row, and for a failure reason that quotes output lines a second row under it
 * spanning the table: the lines behind a disclosure, so a 1 KB reason neither makes the row
 * tall nor squeezes into the status column.
 * @param {Deployment} d @param {HistoryOptions} opts @param {HTMLElement | null} actions
 * @returns {HTMLElement[]}
 */
function rows(d, opts, actions) {
  const when = (/** @type {string | null} */ at) => (at ? new Date(at).toLocaleString() : "—");
  const choose = h(
    "button",
    { type: "button", class: "secondary small", "data-id": d.id, "aria-pressed": String(opts.isChosen(d.id)) },
    "Show",
    h("span", { class: "visually-hidden" }, ` build log of ${d.id}`),
  );
  choose.addEventListener("click", () => {
    opts.onChoose(d);
    document.getElementById("build-log-heading")?.scrollIntoView({ block: "start" });
  });
  const reason = d.failureReason ? splitReason(d.failureReason) : null;
  const cells = [
    h("th", { scope: "row" }, h("code", {}, d.id), d.current ? h("span", { class: "badge current" }, "current") : null),
    h(
      "td",
      {},
      statusBadge(d.status),
      waitingNote(d),
      d.crashedAt ? h("span", { class: "sub" }, `crashed ${when(d.crashedAt)}`) : null,
      reason ? h("span", { class: "failure" }, reason.headline) : null,
    ),
    h("td", {}, d.environment),
    h("td", {}, sourceOf(d)),
    h("td", {}, when(d.createdAt)),
    h("td", {}, when(d.finishedAt)),
    h("td", {}, choose),
    actions ? h("td", {}, actions) : null,
  ].filter((cell) => cell !== null);
  const main = h("tr", { "data-deployment": d.id, class: reason?.lines ? "with-output" : null }, cells);
  if (!reason?.lines) return [main];
  const output = h(
    "tr",
    { class: "failure-output" },
    h(
      "td",
      { colspan: String(cells.length) },
      h(
        "details",
        {},
        h("summary", {}, "Output quoted in the failure reason", h("span", { class: "visually-hidden" }, ` of ${d.id}`)),
        // Focusable: a long output scrolls inside it, and the keyboard must reach that too.
        h("pre", { tabindex: "0" }, reason.lines),
      ),
    ),
  );
  return [main, output];
}

/**
 * A failure reason (escapes removed, for reasons stored before the runner removed them): its
 * first line without the label of the lines it quotes (`…; first error lines:`), and those lines
 * with that label, if any.
 * @param {string} reason
 * @returns {{headline: string, lines: string | null}}
 */
function splitReason(reason) {
  const text = withoutEscapes(reason);
  const end = text.indexOf("\n");
  if (end === -1) return { headline: text, lines: null };
  const first = text.slice(0, end);
  const label = first.lastIndexOf("; ");
  const quoted = label !== -1 && first.endsWith(":");
  return {
    headline: quoted ? first.slice(0, label) : first,
    lines: quoted ? `${first.slice(label + 2)}\n${text.slice(end + 1)}` : text.slice(end + 1),
  };
}

/** @param {Deployment} d */
function sourceOf(d) {
  if (d.source === "git") {
    const repo = d.gitOwner && d.gitRepo ? `${d.gitOwner}/${d.gitRepo}` : "git";
    return [repo, d.branch ? ` @ ${d.branch}` : "", d.commitSha ? h("span", { class: "sub" }, h("code", {}, d.commitSha.slice(0, 12))) : null];
  }
  if (d.source === "upload") return "Uploaded folder";
  if (d.source === "local") return "Local folder";
  return d.source;
}
