// @ts-check
/**
 * The HTTP requests table: one row per request line of the server logs, newest first (as the
 * deployments table), so a live request arrives at the top. Every value is inserted as text.
 * At most MAX_ROWS rows are kept: a busy app followed live cannot grow the page without bound;
 * the dropped (oldest) rows stay readable through "Show older", which pages back from the
 * oldest row shown.
 */
import { h } from "./dom.js";

/** Rows the table keeps while following live; older ones are dropped from the page (the API keeps them). */
export const MAX_ROWS = 500;

/**
 * A request line as GET …/server-logs/recent and the stream send it.
 * @typedef {{id: string, timestamp: string, deploymentId: string | null, method: string, host: string | null, path: string,
 *   status: number, durationMs: number, bytes: number, clientAddress: string, environment: string | null, rule: string | null}} RequestLine
 */

/** Badge colours the deployment statuses already use, by status class. */
const STATUS_CLASS = { 1: "status-queued", 2: "status-ready", 3: "status-queued", 4: "status-degraded", 5: "status-failed" };

/** @param {number} n */
function bytesText(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * @param {{ruleCell: (ruleId: string) => HTMLElement | string}} opts how the rule that refused a request is shown
 */
export function requestTable(opts) {
  const body = h("tbody");
  const table = h(
    "table",
    { class: "requests" },
    h("caption", { class: "visually-hidden" }, "HTTP requests, newest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Time", "Method", "Host", "Path", "Status", "Duration", "Bytes", "Client", "Rule"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    body,
  );

  /** @param {RequestLine} r */
  const row = (r) => {
    const at = new Date(r.timestamp);
    return h(
      "tr",
      { "data-line": r.id },
      h("th", { scope: "row" }, h("time", { datetime: r.timestamp }, at.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" }))),
      h("td", {}, r.method),
      h("td", { class: "wrap" }, r.host ?? "—"),
      h("td", { class: "wrap" }, h("code", {}, r.path)),
      h(
        "td",
        {},
        h("span", { class: `badge ${STATUS_CLASS[/** @type {1} */ (Math.floor(r.status / 100))] ?? ""}` }, String(r.status)),
        r.status === 499 ? h("span", { class: "sub" }, " client went away") : null,
      ),
      h("td", {}, `${r.durationMs} ms`),
      h("td", {}, bytesText(r.bytes)),
      h("td", { class: "wrap" }, r.clientAddress),
      h("td", {}, r.rule ? opts.ruleCell(r.rule) : "—"),
    );
  };

  let dropped = 0;
  return {
    table,
    /** Rows shown. */
    count: () => body.childElementCount,
    /** The newest line shown, where a live stream starts after. */
    newestId: () => body.firstElementChild?.getAttribute("data-line") ?? null,
    /** The oldest line shown, where "Show older" pages back from. */
    oldestId: () => body.lastElementChild?.getAttribute("data-line") ?? null,
    /** Whether live lines pushed rows out of the page (then older ones exist whatever the last page said). */
    dropped: () => dropped > 0,
    /** Newer lines (oldest first, as the API sends them) on top; the oldest rows past MAX_ROWS dropped. @param {RequestLine[]} lines */
    addNewer(lines) {
      const fragment = document.createDocumentFragment();
      for (const line of lines.slice(-MAX_ROWS).reverse()) fragment.append(row(line));
      body.prepend(fragment);
      while (body.childElementCount > MAX_ROWS) {
        body.lastElementChild?.remove();
        dropped++;
      }
    },
    /** Older lines (oldest first) at the bottom. @param {RequestLine[]} lines */
    addOlder(lines) {
      body.append(...lines.slice().reverse().map(row));
      // Read from the oldest row shown: the API's nextCursor now says whether older ones exist.
      dropped = 0;
    },
    clear() {
      body.replaceChildren();
      dropped = 0;
    },
  };
}
