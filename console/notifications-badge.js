// @ts-check
/**
 * The unseen-alerts badge on the shell's Notifications link. The API has no stream for the feed,
 * so the count (GET /api/notifications/deliveries/unseen-count, one indexed count) is polled every
 * few seconds while the tab is visible; the shell is re-rendered on every route, so one timer
 * serves whichever badge element is current, and it stops once the shell is gone (signed out).
 * Every new count is also announced as a `wsp:unseen-count` event so an open Notifications page
 * can refresh its feed without a reload.
 */
import { api } from "./api.js";
import { h } from "./dom.js";

export const POLL_MS = 3000;
export const UNSEEN_EVENT = "wsp:unseen-count";

/** @type {HTMLElement | null} */
let badge = null;
/** @type {ReturnType<typeof setInterval> | undefined} */
let timer;
/** The last count shown (-1: none yet), so only a change is announced. */
let last = -1;
/** Bumped on every new badge, so an answer for an earlier organization or shell is dropped. */
let generation = 0;

/**
 * A badge for the Notifications link, counting this organization's unseen alerts. Hidden at 0.
 * Without notifications:read there is nothing to count: no badge and no polling.
 * @param {boolean} canRead
 * @returns {HTMLElement | null}
 */
export function unseenBadge(canRead) {
  generation++;
  last = -1;
  if (!canRead) {
    stop();
    badge = null;
    return null;
  }
  badge = h("span", { class: "unseen-badge", "data-count": "0" });
  badge.hidden = true;
  if (timer === undefined) timer = setInterval(() => void refreshUnseen(), POLL_MS);
  // After the caller has put the badge in the shell (synchronously, right after this returns).
  queueMicrotask(() => void refreshUnseen());
  return badge;
}

function stop() {
  if (timer !== undefined) clearInterval(timer);
  timer = undefined;
}

/** Reads the count now (after marking seen, or on the timer) and shows it. */
export async function refreshUnseen() {
  if (!badge?.isConnected) {
    // The shell was taken down (the sign-in page): nothing to poll until a new badge is made.
    stop();
    return;
  }
  if (document.visibilityState === "hidden") return;
  const mine = generation;
  let count;
  try {
    count = /** @type {{count: number}} */ (await api("GET", "/notifications/deliveries/unseen-count")).count;
  } catch {
    // A failed poll leaves the last count; the next tick tries again (a 401 has already gone to sign-in).
    return;
  }
  if (mine !== generation || !badge) return;
  show(badge, count);
  if (count !== last) {
    last = count;
    window.dispatchEvent(new CustomEvent(UNSEEN_EVENT, { detail: { count } }));
  }
}

/** @param {HTMLElement} el @param {number} count */
function show(el, count) {
  el.dataset.count = String(count);
  el.hidden = count === 0;
  // Read with the link's name ("Notifications (3 unseen)"); the digits alone are what is drawn.
  el.replaceChildren(h("span", { "aria-hidden": "true" }, count > 99 ? "99+" : String(count)), h("span", { class: "visually-hidden" }, ` (${count} unseen)`));
}

// Back to a hidden tab: count at once rather than at the next tick.
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && timer !== undefined) void refreshUnseen();
});
