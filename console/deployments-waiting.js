// @ts-check
/**
 * Why a queued deployment waits for a build server (`waitingFor`, recomputed by the API on every
 * read: functions/deployments/placement.ts WAITING_REASONS), in words beside its status, with a
 * link to the Servers page where it is fixed. The API's own sentence (`waitingMessage`) covers a
 * reason this console does not know yet.
 */
import { h } from "./dom.js";

/** @type {Record<string, (labels: string[]) => string>} */
const WORDS = {
  no_server: () => "Waiting for a build server: the organization has none yet.",
  all_offline: () => "Waiting for a build server: none has reported in the last minute.",
  all_draining: () => "Waiting for a build server: every one that could take it is draining.",
  labels_unmatched: (labels) => `Waiting for a build server: no online one carries ${labels.length === 1 ? "the label" : "every label"} ${labels.join(", ")}.`,
  server_deleted: () => "Waiting for a build server that was deleted: deploy again on another one, or change the default server in Settings.",
  server_offline: () => "Waiting for its build server, which has not reported in the last minute.",
  server_draining: () => "Waiting for its build server, which is draining (takes no new work).",
};

/** @typedef {{status: string, waitingFor?: string | null, waitingMessage?: string | null, serverLabels?: string[]}} MaybeWaiting */

/** Why a queued deployment waits, in a sentence; null when it does not. @param {MaybeWaiting} d */
export function waitingWords(d) {
  if (d.status !== "queued" || !d.waitingFor) return null;
  return WORDS[d.waitingFor]?.(d.serverLabels ?? []) ?? d.waitingMessage ?? `Waiting for a build server (${d.waitingFor}).`;
}

/** The sentence beside a row's status, with the way to the servers; null when it does not wait. @param {MaybeWaiting} d */
export function waitingNote(d) {
  const words = waitingWords(d);
  if (!words) return null;
  return h("span", { class: "waiting", "data-waiting": d.waitingFor }, words, " ", h("a", { href: "#/servers" }, "Build servers"));
}
