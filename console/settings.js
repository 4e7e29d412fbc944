// @ts-check
/**
 * Settings: the caller's workspace preferences in the active organization (GET /api/settings).
 * Every route of the Settings API answers the whole state, so each form saves only what
 * changed through its own PATCH and refreshes the state the other forms compare against.
 * The API's simple rules are checked here first (enums as selects, a server id required
 * only for the `server` target); what the API still refuses is shown at the field it names.
 * The saved git clone token is never shown: only whether one is set, when, and how it is used.
 */
import { api } from "./api.js";
import { h, uid } from "./dom.js";
import { clearErrors, explain, field, showFieldError, showProblem } from "./forms.js";

/**
 * @typedef {{hasToken: boolean, setAt: string | null, asDefault: boolean}} CloneTokenState
 * @typedef {{buildMode: string, defaultDeployTarget: string | null, defaultServerId: string | null,
 *   cloneToken: CloneTokenState, cloneStrategyPreference: string, forwardGitToServer: boolean}} Settings
 */

/** The API's enums (functions/settings/schema.ts), in words; the value itself is shown too. */
const BUILD_MODES = [
  ["auto", "Automatic (auto)"],
  ["server", "On a build server (server)"],
  ["local", "On this machine (local)"],
];
/** "" stands for null: no default, the target is chosen at each deploy. */
const DEPLOY_TARGETS = [
  ["", "No default: choose at each deploy"],
  ["local", "This machine (local)"],
  ["server", "A build server (server)"],
  ["cloud", "The cloud (cloud)"],
];
const CLONE_STRATEGIES = [
  ["prompt", "Ask at the first deploy (prompt)"],
  ["local", "Clone on this machine (local)"],
  ["remote-with-token", "Clone on the server with the saved token (remote-with-token)"],
];
/** The API's length limits, applied by the inputs (typing stops there). */
const SERVER_ID_MAX = 200;
const TOKEN_MAX = 4096;

/** @param {string[][]} options @param {Record<string, unknown>} attrs */
const select = (options, attrs) =>
  h(
    "select",
    attrs,
    options.map(([value, text]) => h("option", { value }, text)),
  );

/** A checkbox with its label beside it and a hint under it, in a `.field` (where errors are shown). */
function checkField(/** @type {string} */ text, /** @type {HTMLInputElement} */ input, /** @type {string} */ hint) {
  input.id ||= uid("f");
  const hintId = `${input.id}-hint`;
  input.setAttribute("aria-describedby", hintId);
  return h("div", { class: "field" }, h("label", { class: "check", for: input.id }, input, " ", text), h("span", { class: "hint", id: hintId }, hint));
}

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 */
export async function settingsPage(main, ctx) {
  document.title = "Settings · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Settings");
  main.replaceChildren(heading, h("p", { role: "status" }, "Loading…"));
  /** @type {Settings} */
  let settings;
  try {
    settings = await api("GET", "/settings");
  } catch (e) {
    main.replaceChildren(heading, h("p", { role: "alert" }, explain(e)));
    return;
  }
  const org = ctx.me.organizations.find((o) => o.id === ctx.me.activeOrganizationId);
  const canWrite = ctx.can("settings:write");
  const readOnly = canWrite
    ? null
    : h(
        "p",
        { class: "note", id: "settings-read-only-note" },
        `Read-only: your access in this organization (role ${ctx.role ?? "unknown"}) does not include settings:write, so these settings can be read but not changed.`,
      );

  /** Listeners told of every new state (each form refreshes what it shows but not what the user is editing). */
  /** @type {((s: Settings) => void)[]} */
  const listeners = [];
  const state = {
    get: () => settings,
    /** @param {Settings} next */
    set: (next) => {
      settings = next;
      for (const l of listeners) l(next);
    },
    /** @param {(s: Settings) => void} l */
    listen: (l) => listeners.push(l),
  };

  main.replaceChildren(
    heading,
    h("p", { class: "sub" }, `Your own preferences${org ? ` in ${org.name}` : ""}: other members have their own.`),
    readOnly ?? "",
    deploySection(state, canWrite),
    gitSection(state, canWrite),
    cloneTokenSection(state, canWrite),
  );
}

/** @typedef {{get: () => Settings, set: (s: Settings) => void, listen: (l: (s: Settings) => void) => void}} State */

/** The fieldset of a form: disabled with the reason when the caller cannot write. @param {boolean} canWrite @param {string} legend @param {import("./dom.js").Child[]} children */
function fieldset(canWrite, legend, ...children) {
  return h(
    "fieldset",
    { disabled: !canWrite, "aria-describedby": canWrite ? undefined : "settings-read-only-note" },
    h("legend", { class: "visually-hidden" }, legend),
    children,
  );
}

/**
 * Runs the PATCHes of one form in order; stops at the first refusal and shows it at its field.
 * @param {HTMLFormElement} form
 * @param {HTMLElement} saved the form's status line
 * @param {State} state
 * @param {{what: string, path: string, body: unknown}[]} calls
 * @param {Record<string, HTMLElement>} fields API field -> element, for names the form's inputs do not carry
 * @returns {Promise<boolean>} whether every call was saved
 */
async function saveAll(form, saved, state, calls, fields) {
  if (calls.length === 0) {
    saved.textContent = "No changes to save.";
    return true;
  }
  /** @type {string[]} */
  const done = [];
  for (const call of calls) {
    try {
      state.set(await api("PATCH", call.path, call.body));
      done.push(call.what);
    } catch (e) {
      // A 403 (or another error naming no field here) goes to the form's alert line.
      showProblem(form, e, fields);
      if (done.length) saved.textContent = `Saved: ${done.join(", ")}.`;
      return false;
    }
  }
  saved.textContent = `Saved: ${done.join(", ")}.`;
  return true;
}

/** Build mode and the deploy defaults. @param {State} state @param {boolean} canWrite */
function deploySection(state, canWrite) {
  const buildMode = select(BUILD_MODES, { name: "buildMode" });
  const target = select(DEPLOY_TARGETS, { name: "defaultDeployTarget" });
  const serverId = h("input", {
    type: "text",
    name: "defaultServerId",
    autocomplete: "off",
    spellcheck: "false",
    maxlength: SERVER_ID_MAX,
    "aria-required": "true",
  });
  const serverField = field("Default server", serverId, "The id of the build server deploys go to; required for the server target.");
  const saved = h("p", { role: "status", class: "saved" });
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "deploy-heading" },
    fieldset(
      canWrite,
      "Build and deploy defaults",
      field("Default build mode", buildMode),
      field("Default deploy target", target, "An explicit choice at a deploy always wins over this default."),
      serverField,
      h("button", { type: "submit" }, "Save build and deploy defaults"),
    ),
    saved,
  );
  // The server id is asked for only where the API uses it: the `server` target.
  const showServer = () => {
    serverField.hidden = target.value !== "server";
  };
  target.addEventListener("change", showServer);
  /** @param {Settings} s */
  const fill = (s) => {
    buildMode.value = s.buildMode;
    target.value = s.defaultDeployTarget ?? "";
    serverId.value = s.defaultServerId ?? "";
    showServer();
  };
  fill(state.get());

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    saved.textContent = "";
    const s = state.get();
    const chosen = target.value || null;
    const server = serverId.value.trim();
    if (chosen === "server" && !server) {
      showFieldError(serverId, "Enter the server to deploy to: the server target needs a server id.");
      serverId.focus();
      return;
    }
    const calls = [];
    if (buildMode.value !== s.buildMode) calls.push({ what: "build mode", path: "/settings/build-mode", body: { buildMode: buildMode.value } });
    if (chosen !== s.defaultDeployTarget || (chosen === "server" && server !== s.defaultServerId)) {
      calls.push({
        what: "deploy defaults",
        path: "/settings/deploy-defaults",
        body: { defaultDeployTarget: chosen, defaultServerId: chosen === "server" ? server : null },
      });
    }
    // After a refusal the form keeps what the user typed, so it can be corrected.
    if (await saveAll(form, saved, state, calls, {})) fill(state.get());
  });
  return h("section", { "aria-labelledby": "deploy-heading" }, h("h2", { id: "deploy-heading" }, "Build and deploy"), form);
}

/** The clone-strategy preference and forwarding the local git identity. @param {State} state @param {boolean} canWrite */
function gitSection(state, canWrite) {
  const strategy = select(CLONE_STRATEGIES, { name: "cloneStrategyPreference" });
  const forward = h("input", { type: "checkbox", name: "forwardGitToServer" });
  const saved = h("p", { role: "status", class: "saved" });
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "git-heading" },
    fieldset(
      canWrite,
      "Git",
      field("Clone strategy", strategy, "How a linked repository is cloned; anything but prompt stops the first-deploy question."),
      checkField(
        "Forward my local git identity to build servers",
        forward,
        "When on, a clone on a server uses your local git identity over SSH for that clone only; nothing is stored on the server.",
      ),
      h("button", { type: "submit" }, "Save git preferences"),
    ),
    saved,
  );
  /** @param {Settings} s */
  const fill = (s) => {
    strategy.value = s.cloneStrategyPreference;
    forward.checked = s.forwardGitToServer;
  };
  fill(state.get());

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    saved.textContent = "";
    const s = state.get();
    const calls = [];
    if (strategy.value !== s.cloneStrategyPreference)
      calls.push({ what: "clone strategy", path: "/settings/clone-strategy-preference", body: { preference: strategy.value } });
    if (forward.checked !== s.forwardGitToServer)
      calls.push({ what: "git identity forwarding", path: "/settings/forward-git", body: { enabled: forward.checked } });
    if (await saveAll(form, saved, state, calls, { preference: strategy, enabled: forward })) fill(state.get());
  });
  return h("section", { "aria-labelledby": "git-heading" }, h("h2", { id: "git-heading" }, "Git"), form);
}

/** @param {CloneTokenState} t */
function tokenStateText(t) {
  if (!t.hasToken) return "No clone token is saved.";
  const when = t.setAt ? ` on ${new Date(t.setAt).toLocaleString()}` : "";
  return `A clone token is saved (set${when}); ${t.asDefault ? "it is used by default for clones" : "it is not used by default for clones"}. It is stored encrypted and never shown.`;
}

/**
 * The saved git clone token: whether one is set; set, replace or clear it. The typed token is
 * sent once and the input emptied; the API answers only hasToken, setAt and asDefault.
 * @param {State} state @param {boolean} canWrite
 */
function cloneTokenSection(state, canWrite) {
  const status = h("p", { id: "clone-token-state" });
  const token = h("input", {
    type: "password",
    name: "token",
    autocomplete: "off",
    spellcheck: "false",
    maxlength: TOKEN_MAX,
  });
  const asDefault = h("input", { type: "checkbox", name: "asDefault" });
  const tokenField = field("Clone token", token);
  const tokenLabel = /** @type {HTMLLabelElement} */ (tokenField.querySelector("label"));
  const submit = h("button", { type: "submit" }, "Save token");
  const clear = h("button", { type: "button", class: "secondary" }, "Remove saved token");
  const saved = h("p", { role: "status", class: "saved" });
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "token-heading", "aria-describedby": "clone-token-state" },
    fieldset(
      canWrite,
      "Clone token",
      tokenField,
      checkField("Use it by default for clones", asDefault, "Sent with the token: to change this, paste the token again."),
      h("div", { class: "actions" }, submit, clear),
    ),
    saved,
  );
  /** @param {Settings} s */
  const show = (s) => {
    status.textContent = tokenStateText(s.cloneToken);
    tokenLabel.textContent = s.cloneToken.hasToken ? "New clone token (replaces the saved one)" : "Clone token";
    submit.textContent = s.cloneToken.hasToken ? "Replace token" : "Save token";
    clear.hidden = !s.cloneToken.hasToken;
  };
  show(state.get());
  asDefault.checked = state.get().cloneToken.asDefault;
  state.listen(show);

  /** @param {string | null} value @param {string} what */
  const send = async (value, what) => {
    clearErrors(form);
    saved.textContent = "";
    try {
      state.set(await api("PATCH", "/settings/clone-credentials", value === null ? { token: null } : { token: value, asDefault: asDefault.checked }));
      token.value = "";
      asDefault.checked = state.get().cloneToken.asDefault;
      saved.textContent = what;
      // The clear button is hidden once nothing is saved: keep the focus in the form.
      if (value === null) token.focus();
    } catch (e) {
      showProblem(form, e, { token, asDefault });
    }
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    saved.textContent = "";
    if (token.value === "") {
      showFieldError(token, "Paste the token to save. To change only “use by default”, paste the token again.");
      token.focus();
      return;
    }
    await send(token.value, state.get().cloneToken.hasToken ? "Token replaced." : "Token saved.");
  });
  clear.addEventListener("click", () => void send(null, "Token removed."));
  return h("section", { "aria-labelledby": "token-heading" }, h("h2", { id: "token-heading" }, "Git clone token"), status, form);
}
