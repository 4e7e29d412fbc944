// @ts-check
/**
 * The caller's channels: the list (destination as the API shows it: secrets never come back),
 * the create form with each kind's fields (named by their API path, so a problem's `field` such
 * as `config.url` lands at its input), the verification flow (a successful test send verifies;
 * "Mark verified" is PATCH {verified: true}), enable/disable, editing a channel's name and
 * destination (notifications-channel-edit.js), and delete after a confirmation.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showFormError, showProblem } from "./forms.js";
import { editChannelForm } from "./notifications-channel-edit.js";
import { KIND_NAMES } from "./notifications-data.js";

/** @typedef {import("./notifications-data.js").Channel} Channel @typedef {import("./notifications-data.js").ChannelKind} ChannelKind */

/**
 * Each kind's config inputs: API field name, label, hint, input type.
 * @type {Record<ChannelKind, {name: string, label: string, hint: string, type: string, optional?: boolean}[]>}
 */
const KIND_FIELDS = {
  email: [{ name: "address", label: "E-mail address", hint: "Where the messages go.", type: "email" }],
  webhook: [
    { name: "url", label: "Webhook URL", hint: "The http or https endpoint that receives signed POSTs (Standard Webhooks).", type: "url" },
    {
      name: "signingSecret",
      label: "Signing secret (optional)",
      hint: "whsec_ followed by 24 to 64 base64 bytes. Leave empty to have one generated and shown once.",
      type: "secret",
      optional: true,
    },
  ],
  in_app: [],
  slack: [{ name: "webhookUrl", label: "Slack webhook URL", hint: "https://hooks.slack.com/services/… (stored encrypted, never shown again).", type: "url" }],
  discord: [
    {
      name: "webhookUrl",
      label: "Discord webhook URL",
      hint: "https://discord.com/api/webhooks/<id>/<token> (stored encrypted, never shown again).",
      type: "url",
    },
  ],
  msteams: [
    {
      name: "webhookUrl",
      label: "Teams webhook URL",
      hint: "A workflow URL (….logic.azure.com/…/workflows/… or ….api.powerplatform.com/…/workflows/…) or a connector URL (….webhook.office.com/webhookb2/…). Stored encrypted.",
      type: "url",
    },
  ],
};

/** The destination as the API shows it. @param {Channel} c */
function destination(c) {
  switch (c.kind) {
    case "email":
      return c.config.address ?? "";
    case "webhook":
      return [c.config.url ?? "", c.config.signingSecretConfigured ? h("span", { class: "sub" }, "signed (secret stored)") : null];
    case "slack":
    case "discord":
      return c.config.webhookUrlHint ?? "URL stored";
    case "msteams":
      return `URL stored (${c.config.format === "connector" ? "connector, MessageCard" : "workflow, Adaptive Card"})`;
    case "in_app":
      return "This console's alert feed";
  }
}

/**
 * @param {{canWrite: boolean, channels: Channel[], onChanged: () => Promise<void>}} opts
 * @returns {{section: HTMLElement, render: (channels: Channel[]) => void}}
 */
export function channelsSection({ canWrite, channels, onChanged }) {
  const body = h("tbody");
  const status = h("p", { role: "status", class: "saved", id: "channel-status" });
  const failure = h("p", { role: "alert", class: "form-alert" });
  failure.hidden = true;
  // The open edit form (one at a time), under the table: a form inside a table row would not fit a phone.
  const editSlot = h("div", {});
  /** @type {string | null} */
  let editing = null;
  /** @param {string} id */
  const editButtonOf = (id) => /** @type {HTMLElement | null} */ (body.querySelector(`tr[data-channel="${CSS.escape(id)}"] button[data-action="edit"]`));
  /** @param {boolean} [refocus] */
  const closeEdit = (refocus = true) => {
    const id = editing;
    editing = null;
    editSlot.replaceChildren();
    if (refocus && id) editButtonOf(id)?.focus();
  };
  const table = h(
    "table",
    { class: "channels" },
    h("caption", { class: "visually-hidden" }, "Your channels in this organization"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Channel"),
        h("th", { scope: "col" }, "Destination"),
        h("th", { scope: "col" }, "State"),
        h("th", { scope: "col" }, "Actions"),
      ),
    ),
    body,
  );
  const section = h(
    "section",
    { "aria-labelledby": "channels-heading" },
    h("h2", { id: "channels-heading" }, "Channels"),
    h(
      "p",
      { class: "sub" },
      "Only enabled, verified channels receive alerts. A new channel other than in-app starts unverified: send a test (a successful one verifies it) or mark it verified.",
    ),
    failure,
    h("div", { class: "table-wrap" }, table),
    status,
    editSlot,
    createForm(canWrite, onChanged, status),
  );

  /** @param {string} text */
  const done = (text) => {
    failure.hidden = true;
    status.textContent = text;
  };
  /** @param {string} text */
  const alert = (text) => {
    status.textContent = "";
    failure.textContent = text;
    failure.hidden = false;
  };
  /** @param {unknown} e @param {string} what */
  const failed = (e, what) => alert(`${what}: ${explain(e)}`);

  /** @param {Channel} c */
  const actions = (c) => {
    if (!canWrite) return h("span", { class: "sub" }, "Read-only");
    /** @param {string} text @param {() => Promise<void>} run @param {string} [cls] */
    const button = (text, run, cls = "secondary small") =>
      h(
        "button",
        {
          type: "button",
          class: cls,
          // The visible verb, then which channel (several rows have the same buttons).
          "aria-label": `${text} (${c.label})`,
          onclick: async (/** @type {Event} */ ev) => {
            const b = /** @type {HTMLButtonElement} */ (ev.currentTarget);
            b.disabled = true;
            try {
              await run();
            } finally {
              b.disabled = false;
            }
          },
        },
        text,
      );
    const list = [];
    const edit = button("Edit", async () => {
      const opened = editChannelForm(c, KIND_FIELDS[c.kind], {
        close: () => closeEdit(),
        saved: async (updated, message) => {
          editing = null;
          editSlot.replaceChildren();
          await onChanged();
          done(message);
          editButtonOf(updated.id)?.focus();
        },
      });
      editing = c.id;
      editSlot.replaceChildren(opened.form);
      opened.form.scrollIntoView({ block: "nearest" });
      opened.focus();
    });
    edit.setAttribute("data-action", "edit");
    list.push(edit);
    list.push(
      button("Send test", async () => {
        status.textContent = `Sending a test to ${c.label}…`;
        try {
          const r = await api("POST", `/notifications/channels/${encodeURIComponent(c.id)}/test`);
          if (r.delivered)
            done(
              `Test to ${c.label} delivered${r.statusCode ? ` (status ${r.statusCode})` : ""} in ${r.durationMs} ms${!c.verified && r.channel.verified ? "; the channel is now verified" : ""}.`,
            );
          else alert(`Test to ${c.label} failed: ${r.reason ?? "no reason given"}${r.statusCode ? ` (status ${r.statusCode})` : ""}.`);
          await onChanged();
        } catch (e) {
          failed(e, `Test to ${c.label} not sent`);
        }
      }),
    );
    if (!c.verified)
      list.push(
        button("Mark verified", async () => {
          try {
            await api("PATCH", `/notifications/channels/${encodeURIComponent(c.id)}`, { verified: true });
            await onChanged();
            done(`${c.label} is marked verified: it receives alerts now.`);
          } catch (e) {
            failed(e, `${c.label} not marked verified`);
          }
        }),
      );
    list.push(
      button(c.enabled ? "Disable" : "Enable", async () => {
        try {
          await api("PATCH", `/notifications/channels/${encodeURIComponent(c.id)}`, { enabled: !c.enabled });
          await onChanged();
          done(`${c.label} is ${c.enabled ? "disabled" : "enabled"}.`);
        } catch (e) {
          failed(e, `${c.label} not changed`);
        }
      }),
    );
    const cell = h("div", { class: "actions" });
    const remove = button("Delete", async () => {
      // A second, explicit step: a deleted channel takes its subscriptions with it.
      const confirm = h("button", { type: "button", class: "danger small" }, `Delete ${c.label} and its subscriptions`);
      const cancel = h("button", { type: "button", class: "secondary small", "aria-label": `Cancel deleting ${c.label}` }, "Cancel");
      const before = Array.from(cell.childNodes);
      cancel.addEventListener("click", () => {
        cell.replaceChildren(...before);
        remove.focus();
      });
      confirm.addEventListener("click", async () => {
        confirm.disabled = true;
        try {
          await api("DELETE", `/notifications/channels/${encodeURIComponent(c.id)}`);
          await onChanged();
          done(`${c.label} deleted.`);
          /** @type {HTMLElement | null} */ (section.querySelector("h2"))?.focus();
        } catch (e) {
          confirm.disabled = false;
          failed(e, `${c.label} not deleted`);
        }
      });
      cell.replaceChildren(confirm, cancel);
      confirm.focus();
    });
    list.push(remove);
    cell.append(...list);
    return cell;
  };

  /** @param {Channel[]} list */
  const render = (list) => {
    // A channel deleted meanwhile takes its open edit form with it.
    if (editing && !list.some((c) => c.id === editing)) closeEdit(false);
    body.replaceChildren(
      ...list.map((c) =>
        h(
          "tr",
          { "data-channel": c.id },
          h("th", { scope: "row" }, c.label, h("span", { class: "sub" }, KIND_NAMES[c.kind])),
          h("td", {}, destination(c)),
          h(
            "td",
            {},
            h("span", { class: `badge ${c.verified ? "status-live" : "status-disabled"}` }, c.verified ? "verified" : "unverified"),
            c.enabled ? null : h("span", { class: "badge status-disabled" }, "disabled"),
          ),
          h("td", {}, actions(c)),
        ),
      ),
    );
    if (list.length === 0) body.append(h("tr", {}, h("td", { colspan: "4" }, "No channels yet.")));
  };
  render(channels);
  // The heading takes focus after a deletion (its row is gone).
  /** @type {HTMLElement} */ (section.querySelector("h2")).tabIndex = -1;
  return { section, render };
}

/**
 * @param {boolean} canWrite
 * @param {() => Promise<void>} onChanged
 * @param {HTMLElement} status
 */
function createForm(canWrite, onChanged, status) {
  const kind = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { name: "kind" },
      Object.entries(KIND_NAMES).map(([value, text]) => h("option", { value }, text)),
    )
  );
  const label = h("input", { type: "text", name: "label", maxlength: 100, autocomplete: "off", required: true });
  const configFields = h("div", { class: "grid" });
  const secretShown = h("div", { class: "note" });
  secretShown.hidden = true;
  /** @type {Record<string, HTMLInputElement>} */
  let inputs = {};
  const renderFields = () => {
    inputs = {};
    configFields.replaceChildren(
      ...KIND_FIELDS[/** @type {ChannelKind} */ (kind.value)].map((f) => {
        const input = h("input", {
          type: f.type === "email" ? "email" : "text",
          name: `config.${f.name}`,
          autocomplete: "off",
          spellcheck: "false",
          inputmode: f.type === "url" ? "url" : undefined,
          required: !f.optional,
        });
        inputs[f.name] = input;
        return field(f.label, input, f.hint);
      }),
    );
    if (kind.value === "in_app") configFields.append(h("p", { class: "sub" }, "Alerts appear in this console's feed; nothing to configure."));
  };
  kind.addEventListener("change", renderFields);
  renderFields();
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "new-channel-heading" },
    h("h3", { id: "new-channel-heading" }, "Add a channel"),
    h(
      "fieldset",
      { disabled: !canWrite, "aria-describedby": canWrite ? undefined : "notifications-read-only" },
      h("legend", { class: "visually-hidden" }, "New channel"),
      h("div", { class: "grid" }, field("Kind", kind), field("Name", label, "How the channel is shown here, e.g. Ops e-mail.")),
      configFields,
      h("button", { type: "submit" }, "Add channel"),
    ),
    secretShown,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    secretShown.hidden = true;
    status.textContent = "";
    /** @type {Record<string, string>} */
    const config = {};
    for (const [name, input] of Object.entries(inputs)) {
      const value = input.value.trim();
      if (value) config[name] = value;
    }
    const k = /** @type {ChannelKind} */ (kind.value);
    const first = Object.values(inputs)[0];
    try {
      const created = await api("POST", "/notifications/channels", { kind: k, label: label.value, ...(k === "in_app" ? {} : { config }) });
      label.value = "";
      for (const input of Object.values(inputs)) input.value = "";
      status.textContent = `${created.label} added${created.verified ? "" : " (unverified: send a test or mark it verified)"}.`;
      if (created.signingSecret) {
        const shown = h("input", { type: "text", readonly: true, value: created.signingSecret, id: "new-signing-secret" });
        secretShown.replaceChildren(
          field(`Signing secret of ${created.label}`, shown, "Shown only now: copy it to the receiver, which checks webhook-signature with it."),
        );
        secretShown.hidden = false;
      }
      await onChanged();
    } catch (e) {
      // `config` alone (missing) is blamed on the kind's first input; the rest name their input.
      if (!canWrite) showFormError(form, explain(e));
      else showProblem(form, e, first ? { config: first } : {});
    }
  });
  return form;
}
