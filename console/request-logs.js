// @ts-check
/**
 * A project's HTTP requests (its server logs: one line per request the edge served):
 * GET /api/projects/{id}/server-logs/recent with the API's filters, newest first, older pages on
 * request, and a "Follow live" toggle that reads the server-log stream after the newest row
 * shown (event-stream.js: resumes with Last-Event-ID, drops a connection whose heartbeats
 * stopped). The rule that refused a request is named with its kind (GET …/route-rules) and links
 * to the rules page. Where this server has no such routes, a sentence says so.
 */
import { projectSubpage } from "./project-subpage.js";
import { api, ApiError } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, showProblem } from "./forms.js";
import { followEvents } from "./event-stream.js";
import { requestFilters } from "./request-logs-filters.js";
import { requestTable } from "./request-logs-table.js";
import { isUnknownRoute } from "./self-hosted-only.js";

/** Lines a page read asks for. */
const PAGE = 100;

/** @param {HTMLElement} main @param {import("./app.js").Ctx} ctx @param {string} projectId */
export async function requestLogsPage(main, ctx, projectId) {
  const frame = projectSubpage(main, projectId, "HTTP requests");
  const { base, heading, back } = frame;

  if (!ctx.can("project:read")) {
    main.replaceChildren(
      back,
      heading,
      h("p", { class: "note" }, `Your role (${ctx.role ?? "none"}) in this organization cannot read request logs (it needs project:read).`),
    );
    return;
  }
  const project = await frame.load();
  if (!project) return;

  const rules = await ruleKinds(base);
  const alive = () => main.isConnected;
  /** @type {{close: () => void} | null} */
  let stream = null;
  const stopStream = () => {
    stream?.close();
    stream = null;
  };
  // The route renders the next page after hashchange: close the stream once it has.
  const onLeave = () =>
    setTimeout(() => {
      if (alive()) return;
      stopStream();
      window.removeEventListener("hashchange", onLeave);
    }, 0);
  window.addEventListener("hashchange", onLeave);

  const table = requestTable({
    ruleCell: (id) => {
      const rule = rules.get(id);
      return h("a", { href: `#${base}/rules`, class: "wrap" }, rule ? `${rule} ` : "", h("code", {}, id));
    },
  });
  const filters = requestFilters({ onApply: () => void load() });
  const summary = h("p", { role: "status", class: "sub" });
  const live = h("button", { type: "button", class: "secondary", "aria-pressed": "false", "aria-describedby": "live-status" }, "Follow live");
  const liveStatus = h(
    "p",
    { class: "log-status", role: "status", id: "live-status" },
    "Not following: new requests appear once you press Follow live or reload.",
  );
  const more = h("button", { type: "button", class: "secondary" }, "Show older requests");
  more.hidden = true;
  const wrap = h("div", { class: "table-wrap requests-wrap", tabindex: "0", role: "region", "aria-labelledby": "requests-heading" }, table.table);
  main.replaceChildren(
    back,
    heading,
    h(
      "p",
      { class: "sub" },
      "Each request the edge served to this project's apps: newest first, in your local time. Query strings and headers are never stored.",
    ),
    h("section", { "aria-labelledby": "filters-heading" }, h("h2", { id: "filters-heading" }, "Filters"), filters.form),
    h(
      "section",
      { "aria-labelledby": "requests-heading" },
      h("h2", { id: "requests-heading" }, "Requests"),
      h("div", { class: "actions" }, live),
      liveStatus,
      summary,
      wrap,
      h("div", { class: "actions" }, more),
    ),
  );

  /** @type {string | null} */
  let nextCursor = null;
  /** Bumped by each read: a page still loading for earlier filters is dropped. */
  let generation = 0;

  const showSummary = () => {
    const n = table.count();
    const filtered = filters.describe();
    wrap.hidden = n === 0;
    more.hidden = !(nextCursor || table.dropped());
    if (n === 0) {
      summary.textContent = filtered
        ? `No requests match these filters (${filtered}).`
        : "No requests yet: each request to the project's hostnames shows here once the edge has served it.";
    } else {
      summary.textContent = `Showing ${n.toLocaleString("en")} ${n === 1 ? "request" : "requests"}${filtered ? ` matching ${filtered}` : ""}${table.dropped() ? "; older ones were dropped from the page, Show older requests reads them again" : ""}.`;
    }
  };

  /** A refusal of a read: at the filter it names, a sentence for an unknown route, else the alert. @param {unknown} e */
  const refused = (e) => {
    if (isUnknownRoute(e)) {
      summary.textContent = "This server does not keep request logs: they are written by the edge of a self-hosted server.";
      live.disabled = true;
      liveStatus.textContent = "";
    } else if (e instanceof ApiError && e.status === 400) showProblem(filters.form, e);
    else summary.textContent = explain(e);
  };

  const load = async () => {
    const mine = ++generation;
    stopStream();
    clearErrors(filters.form);
    summary.textContent = "Loading requests…";
    try {
      const page = await api("GET", `${base}/server-logs/recent?${withLimit(filters.query())}`);
      if (!alive() || mine !== generation) return;
      table.clear();
      table.addNewer(page.items);
      nextCursor = page.nextCursor;
      showSummary();
      if (live.getAttribute("aria-pressed") === "true") follow();
    } catch (e) {
      if (!alive() || mine !== generation) return;
      table.clear();
      wrap.hidden = true;
      refused(e);
    }
  };

  /** Follows the stream after the newest row shown (none: from the first line, as every line after 0 is new). */
  const follow = () => {
    stopStream();
    const mine = generation;
    const current = () => alive() && mine === generation;
    const query = filters.query().toString();
    stream = followEvents(`${base}/server-logs/stream${query ? `?${query}` : ""}`, {
      event: "request",
      lastEventId: table.newestId() ?? "0",
      alive: current,
      onEvents: (/** @type {import("./request-logs-table.js").RequestLine[]} */ lines) => {
        table.addNewer(lines);
        showSummary();
      },
      onState: (state, detail) => setLive(streamWords(state, detail)),
      onEnd: (end) =>
        stopped(`The live stream ended: ${end.reason}${end.detail ? ` (${end.detail})` : ""}. Rows already shown stay; reload the page to follow again.`),
      onFail: (e) =>
        stopped(
          isUnknownRoute(e) ? "This server cannot follow requests live: that is a self-hosted server's feature." : `The live stream stopped: ${explain(e)}`,
        ),
    });
  };
  /** @param {string} text @param {"ok" | "error" | ""} [tone] */
  const setLive = (text, tone = "") => {
    liveStatus.textContent = text;
    liveStatus.className = `log-status${tone ? ` ${tone}` : ""}`;
  };
  /** @param {string} text */
  const stopped = (text) => {
    stream = null;
    live.setAttribute("aria-pressed", "false");
    setLive(text, "error");
  };

  live.addEventListener("click", () => {
    const on = live.getAttribute("aria-pressed") !== "true";
    live.setAttribute("aria-pressed", String(on));
    if (on) follow();
    else {
      stopStream();
      setLive("Not following: new requests appear once you press Follow live or reload.");
    }
  });
  more.addEventListener("click", async () => {
    const from = table.oldestId();
    if (!from) return;
    try {
      const query = withLimit(filters.query());
      query.set("cursor", from);
      const page = await api("GET", `${base}/server-logs/recent?${query}`);
      table.addOlder(page.items);
      nextCursor = page.nextCursor;
      showSummary();
    } catch (e) {
      refused(e);
    }
  });

  await load();
}

/** @param {URLSearchParams} query */
function withLimit(query) {
  query.set("limit", String(PAGE));
  return query;
}

/** @param {import("./event-stream.js").StreamState} state @param {string | undefined} detail */
function streamWords(state, detail) {
  if (state === "connecting") return "Connecting to the live requests…";
  if (state === "live") return "Following live: new requests appear at the top.";
  return `Connection lost; reconnecting${detail ? ` (${detail})` : ""}. Rows already shown stay.`;
}

/**
 * The project's rules by id, as "ban", "allow-deny", "rate-limit": the request table names the kind
 * of the rule that refused a request. Empty when they cannot be read (a server without route rules).
 * @param {string} base
 * @returns {Promise<Map<string, string>>}
 */
async function ruleKinds(base) {
  try {
    /** @type {{items: {id: string, kind: string}[]}} */
    const list = await api("GET", `${base}/route-rules`);
    return new Map(list.items.map((r) => [r.id, r.kind]));
  } catch {
    return new Map();
  }
}
