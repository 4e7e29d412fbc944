// @ts-check
/**
 * A deployment row's actions for roles with project:write: Cancel for a queued or building
 * deployment (POST /api/deployments/{id}/cancel) and Promote for a ready, non-current one
 * (POST /api/deployments/{id}/promote, a rollback without a rebuild), the latter after a
 * second, explicit step since it moves the environment's traffic. The caller re-reads the
 * list after either outcome: a refusal (409: the state moved on, the build was pruned or
 * crashed) is shown on the row as it now is.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";

/** @typedef {import("./deployments.js").Deployment} Deployment */

/**
 * @typedef {{
 *   error?: string,
 *   done: (d: Deployment, message: string) => Promise<void>,
 *   refused: (d: Deployment, message: string) => Promise<void>,
 * }} ActionHooks
 */

/** States the API cancels (a deploying one is about to switch traffic: it finishes or fails). */
const CANCELABLE = ["queued", "building"];

/** Whether the API would promote `d`, as far as the row knows (it may have moved on since). @param {Deployment} d */
export const promotable = (d) => d.status === "ready" && !d.current && !d.prunedAt && !d.crashedAt;

/**
 * The cell's content: the buttons that apply to `d`, a word on why a ready one cannot be promoted,
 * and the last refusal of an action on it.
 * @param {Deployment} d
 * @param {ActionHooks} hooks
 */
export function rowActions(d, hooks) {
  const cell = h("div", { class: "row-actions" });
  /** @param {string} verb @param {string} [cls] */
  const button = (verb, cls = "secondary small") =>
    h("button", { type: "button", class: cls, "data-action": verb.toLowerCase() }, verb, h("span", { class: "visually-hidden" }, ` ${d.id}`));

  /** Runs `call`, then hands its outcome to the caller (which re-reads the list). @param {HTMLButtonElement} b @param {() => Promise<string>} call @param {string} what */
  const run = async (b, call, what) => {
    b.disabled = true;
    try {
      const message = await call();
      await hooks.done(d, message);
    } catch (e) {
      await hooks.refused(d, `${what}: ${explain(e)}`);
    } finally {
      b.disabled = false;
    }
  };

  const buttons = [];
  if (CANCELABLE.includes(d.status)) {
    const cancel = button("Cancel");
    cancel.addEventListener("click", () =>
      run(
        cancel,
        async () => {
          await api("POST", `/deployments/${encodeURIComponent(d.id)}/cancel`);
          return `${d.id} canceled.`;
        },
        "Not canceled",
      ),
    );
    buttons.push(cancel);
  }
  if (promotable(d)) {
    const promote = button("Promote");
    promote.addEventListener("click", () => {
      // The second step: promoting moves the environment's traffic to this build.
      const question = h("span", { class: "confirm-text" }, `Serve ${d.id} as the current ${d.environment} deployment?`);
      const yes = h(
        "button",
        { type: "button", class: "small", "data-action": "confirm-promote" },
        "Yes, promote",
        h("span", { class: "visually-hidden" }, ` ${d.id}`),
      );
      const no = h(
        "button",
        { type: "button", class: "secondary small" },
        "Keep current",
        h("span", { class: "visually-hidden" }, ` (do not promote ${d.id})`),
      );
      const before = Array.from(cell.childNodes);
      no.addEventListener("click", () => {
        cell.replaceChildren(...before);
        promote.focus();
      });
      yes.addEventListener("click", () =>
        run(
          yes,
          async () => {
            await api("POST", `/deployments/${encodeURIComponent(d.id)}/promote`);
            return `${d.id} is now the current ${d.environment} deployment.`;
          },
          "Not promoted",
        ),
      );
      cell.replaceChildren(question, h("span", { class: "actions" }, yes, no));
      yes.focus();
    });
    buttons.push(promote);
  }
  if (buttons.length) cell.append(h("span", { class: "actions" }, ...buttons));
  else if (d.status === "ready" && !d.current) {
    cell.append(h("span", { class: "sub" }, d.prunedAt ? "Build removed: deploy again instead." : "Crashed: deploy again instead."));
  }
  if (hooks.error) cell.append(h("p", { class: "field-error", role: "alert" }, hooks.error));
  return cell;
}
