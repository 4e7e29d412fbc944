// @ts-check
/**
 * A log region: lines appended as text (never markup) to a `<pre>` with aria-live="off"
 * (a chatty app would drown a screen reader; the status line beside it says what the
 * stream is doing), ANSI escapes removed, and at most MAX_LINES kept so an app that logs
 * without pause cannot grow the page without bound.
 */
import { h } from "./dom.js";

/** Lines a log region keeps; older ones are dropped from the page (the API keeps them). */
export const MAX_LINES = 2_000;

/**
 * ANSI/VT escapes: CSI (colours, cursor moves), OSC (titles, hyperlinks; ended by BEL or ESC \),
 * and two-character escapes. Built from a string so the source holds no raw control characters.
 */
const ANSI = new RegExp(
  ["\\u001b\\[[0-?]*[ -/]*[@-~]", "\\u001b\\][^\\u0007\\u001b]*(?:\\u0007|\\u001b\\\\)?", "\\u009b[0-?]*[ -/]*[@-~]", "\\u001b[@-_]"].join("|"),
  "g",
);
/** Other control characters (tab kept): shown as nothing rather than as boxes. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is what it is for.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text of several lines from a terminal (a failure reason) in plain text: escapes and control
 * characters removed, its line breaks and tabs kept.
 * @param {string} text
 */
export function withoutEscapes(text) {
  return text.replace(ANSI, "").replace(CONTROL, "");
}

/**
 * The line as a terminal would leave it, in plain text: escapes removed, and for a line
 * redrawn with carriage returns (progress bars) only what was written last.
 * @param {string} message
 */
export function plainText(message) {
  const noEscapes = message.replace(ANSI, "");
  const redraws = noEscapes.split("\r").filter((part) => part !== "");
  return (redraws.at(-1) ?? "").replace(CONTROL, "");
}

/** Characters of a deployment id's random end kept in a label (as `wsp logs` does). */
const SHORT_ID_CHARS = 4;

/**
 * Where a runtime line comes from, `[production dpl_…a1b2]`: its environment and the end of its
 * deployment id, the label `wsp logs` prints (functions/cli/logs.ts), so the console and the terminal
 * read alike. On every line: production and previews write to the same stream.
 * @param {import("./deployments-stream.js").LogLine} line
 */
export function sourceLabel(line) {
  const id = line.deploymentId;
  // The prefix says what it is; the id's end is random (its start is a timestamp, alike for deployments made together).
  const short = id === null ? "-" : `${id.slice(0, id.indexOf("_") + 1)}…${id.slice(-SHORT_ID_CHARS)}`;
  return line.environment ? `[${line.environment} ${short}]` : `[${short}]`;
}

/**
 * @typedef {{element: HTMLElement, heading: HTMLElement, setStatus: (text: string, tone?: "ok" | "error" | "") => void,
 *   append: (lines: import("./deployments-stream.js").LogLine[]) => void, clear: () => void}} LogRegion
 */

/**
 * `labelled`: each line starts with its source label (a project's runtime logs mix deployments;
 * a build log is one deployment's). `tools`: controls shown above the lines (a filter).
 * @param {{id: string, title: string, hint?: string, labelled?: boolean, tools?: HTMLElement}} opts
 * @returns {LogRegion}
 */
export function logRegion(opts) {
  const headingId = `${opts.id}-heading`;
  const status = h("p", { class: "log-status", role: "status", id: `${opts.id}-status` });
  const count = h("span", { class: "sub log-count", id: `${opts.id}-count` });
  const pre = h("pre", {
    class: "log",
    id: `${opts.id}-lines`,
    role: "log",
    "aria-live": "off",
    "aria-labelledby": headingId,
    "aria-describedby": `${opts.id}-status ${opts.id}-count`,
    // Focusable, so the keyboard can scroll it.
    tabindex: "0",
  });
  const heading = h("h2", { id: headingId }, opts.title);
  const element = h(
    "section",
    { "aria-labelledby": headingId, class: "log-section" },
    heading,
    opts.hint ? h("p", { class: "sub" }, opts.hint) : null,
    opts.tools ?? null,
    status,
    pre,
    count,
  );
  let shown = 0;
  let dropped = 0;

  const updateCount = () => {
    count.textContent =
      shown === 0
        ? "No lines yet."
        : dropped > 0
          ? `Showing the last ${shown.toLocaleString("en")} lines; ${dropped.toLocaleString("en")} older ones were dropped from the page.`
          : `${shown.toLocaleString("en")} ${shown === 1 ? "line" : "lines"}.`;
  };
  updateCount();

  return {
    element,
    heading,
    /** @param {string} text @param {"ok" | "error" | ""} [tone] */
    setStatus(text, tone = "") {
      status.textContent = text;
      status.className = `log-status${tone ? ` ${tone}` : ""}`;
    },
    /** @param {import("./deployments-stream.js").LogLine[]} lines */
    append(lines) {
      if (lines.length === 0) return;
      // Only follow the newest lines when the reader is already at the bottom (not while reading older ones).
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      const fragment = document.createDocumentFragment();
      for (const line of lines.slice(-MAX_LINES)) {
        const time = line.timestamp.slice(11, 19);
        fragment.append(
          h(
            "span",
            { class: `line ${line.stream}` },
            `${time} `,
            opts.labelled ? [h("span", { class: "log-source" }, sourceLabel(line)), " "] : null,
            `${line.stream === "stdout" ? "" : `[${line.stream}] `}${plainText(line.message)}\n`,
          ),
        );
      }
      dropped += Math.max(0, lines.length - MAX_LINES);
      pre.append(fragment);
      shown = pre.childElementCount;
      while (shown > MAX_LINES) {
        pre.firstElementChild?.remove();
        shown--;
        dropped++;
      }
      updateCount();
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    },
    clear() {
      pre.replaceChildren();
      shown = 0;
      dropped = 0;
      updateCount();
    },
  };
}
