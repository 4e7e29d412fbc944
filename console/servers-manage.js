// @ts-check
/**
 * A build server's controls for org:admin, on its card (servers.js): edit its name, labels and
 * public URL (PATCH /api/servers/{id}, the API's 400 shown at the field), drain or undrain it
 * (PATCH `draining`: a drained server takes no new work, what it builds and serves goes on), and
 * delete it after a confirmation saying what follows (DELETE: its token refused at once, a build
 * it holds handed back to the queue, the apps it runs stopped). The page re-reads the list after
 * each change; a refusal stays on the card.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain } from "./forms.js";
import { serverFields } from "./servers-form.js";

/**
 * @typedef {import("./servers.js").Server} Server
 * @typedef {{done: (message: string, focus: {id: string, action: string} | null) => Promise<void>}} ManageHooks
 */

const plural = (/** @type {number} */ n, /** @type {string} */ word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * @param {Server} s
 * @param {ManageHooks} hooks
 * @returns {HTMLElement}
 */
export function serverActions(s, hooks) {
  const path = `/servers/${encodeURIComponent(s.id)}`;
  const error = h("p", { class: "field-error", role: "alert", hidden: true });
  const fail = (/** @type {unknown} */ e) => {
    error.textContent = explain(e);
    error.hidden = false;
  };
  /** @param {string} verb @param {string} action */
  const button = (verb, action) =>
    h("button", { type: "button", class: "secondary small", "data-action": action }, verb, h("span", { class: "visually-hidden" }, ` ${s.name}`));
  const edit = button("Edit", "edit");
  const drain = s.draining ? button("Undrain", "undrain") : button("Drain", "drain");
  const remove = button("Delete", "delete");
  const controls = h("div", { class: "actions" }, edit, drain, remove);
  const box = h("div", { class: "server-actions" }, controls, error);

  /** Puts `part` where the buttons were; `back` restores them with the focus on `focus`. @param {HTMLElement} part */
  const swapIn = (part) => {
    error.hidden = true;
    controls.replaceWith(part);
    return (/** @type {HTMLElement} */ focus) => {
      part.replaceWith(controls);
      focus.focus();
    };
  };

  edit.addEventListener("click", () => {
    const fields = serverFields(s, { editing: true });
    const save = h("button", { type: "submit", class: "small" }, "Save", h("span", { class: "visually-hidden" }, ` ${s.name}`));
    const cancel = h("button", { type: "button", class: "secondary small" }, "Cancel");
    const form = h(
      "form",
      { novalidate: true, class: "server-edit", "aria-label": `Edit ${s.name}` },
      fields.element,
      h("div", { class: "actions" }, save, cancel),
    );
    const back = swapIn(form);
    fields.name.focus();
    cancel.addEventListener("click", () => back(edit));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      save.disabled = true;
      try {
        /** @type {Server} */
        const changed = await api("PATCH", path, fields.body());
        await hooks.done(`${changed.name} was saved.`, { id: s.id, action: "edit" });
      } catch (e) {
        fields.showError(form, e);
      } finally {
        save.disabled = false;
      }
    });
  });

  drain.addEventListener("click", async () => {
    error.hidden = true;
    drain.disabled = true;
    try {
      await api("PATCH", path, { draining: !s.draining });
      const message = s.draining ? `${s.name} takes new work again.` : `${s.name} is drained: it takes no new work; what it builds and serves goes on.`;
      await hooks.done(message, { id: s.id, action: s.draining ? "drain" : "undrain" });
    } catch (e) {
      fail(e);
    } finally {
      drain.disabled = false;
    }
  });

  remove.addEventListener("click", () => {
    const confirm = h("button", { type: "button", class: "small" }, "Delete", h("span", { class: "visually-hidden" }, ` ${s.name}`), " now");
    const keep = h("button", { type: "button", class: "secondary small" }, "Keep", h("span", { class: "visually-hidden" }, ` ${s.name}`));
    const question = h(
      "div",
      {},
      h(
        "p",
        { class: "confirm-text" },
        `Delete ${s.name}? Its runner token is refused from its next request; a build it holds goes back to the queue for another server; ` +
          "the apps it runs stop, and their deployments are marked failed (deploy again to run them elsewhere).",
      ),
      h("div", { class: "actions" }, confirm, keep),
    );
    const back = swapIn(question);
    confirm.focus();
    keep.addEventListener("click", () => back(remove));
    confirm.addEventListener("click", async () => {
      confirm.disabled = true;
      try {
        /** @type {{id: string, requeued: string[], stopped: string[]}} */
        const deleted = await api("DELETE", path);
        const handed = deleted.requeued.length ? `; ${plural(deleted.requeued.length, "build")} went back to the queue` : "";
        const stopped = deleted.stopped.length ? `; ${plural(deleted.stopped.length, "deployment")} it served stopped` : "";
        await hooks.done(`${s.name} was deleted and its runner token revoked${handed}${stopped}.`, null);
      } catch (e) {
        back(remove);
        fail(e);
      }
    });
  });

  return box;
}
