// @ts-check
/**
 * Your personal access tokens and sessions (behind `token:manage`, which every role holds):
 * create a token with a name, every permission of your role or only some (its scopes, within
 * what you hold in the active organization) and an optional expiry; the secret is shown once
 * (POST /api/tokens answers it, nothing else ever does). List and revoke tokens; list the
 * browser sessions signed in as you and end any of them (the current one signs you out here).
 */
import { api } from "./api.js";
import { h, uid } from "./dom.js";
import { clearErrors, explain, field, showFieldError, showProblem } from "./forms.js";
import { shownOnce } from "./once.js";

/**
 * @typedef {{id: string, name: string, displayPrefix: string, scopes: string[] | null, expiresAt: string | null, createdAt: string}} Token
 * @typedef {{id: string, createdAt: string, lastSeenAt: string, idleExpiresAt: string, expiresAt: string, userAgent: string | null,
 *   signedInWith: "code" | "token", current: boolean}} Session
 */

const when = (/** @type {string | null} */ at) => (at ? new Date(at).toLocaleString() : "—");

/**
 * "Chrome 135 on Linux" from a User-Agent header: the whole header is a line of tokens nobody reads
 * (and a row's width on a phone). Unknown shapes fall back to the header's first 60 characters.
 * @param {string | null} ua
 */
function browserName(ua) {
  if (!ua) return "Unknown browser";
  // Order matters: Edge and Opera say Chrome too, Chrome says Safari too.
  const browser = [
    ["Edge", /Edg\/(\d+)/],
    ["Opera", /OPR\/(\d+)/],
    ["Firefox", /Firefox\/(\d+)/],
    ["Chrome", /(?:HeadlessChrome|Chrome|Chromium)\/(\d+)/],
    ["Safari", /Version\/(\d+)[^ ]* .*Safari\//],
  ]
    .map(([name, re]) => {
      const m = /** @type {RegExp} */ (re).exec(ua);
      return m ? `${name} ${m[1]}` : null;
    })
    .find(Boolean);
  const os = [
    ["Android", /Android/],
    ["iOS", /iPhone|iPad/],
    ["Windows", /Windows/],
    ["macOS", /Mac OS X/],
    ["Linux", /Linux|X11/],
  ].find(([, re]) => /** @type {RegExp} */ (re).test(ua))?.[0];
  if (!browser) return ua.length > 60 ? `${ua.slice(0, 60)}…` : ua;
  return os ? `${browser} on ${os}` : browser;
}

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 */
export async function tokensPage(main, ctx) {
  document.title = "Tokens and sessions · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Tokens and sessions");
  if (!ctx.can("token:manage")) {
    main.replaceChildren(heading, h("p", { class: "note" }, "This session cannot manage tokens (token:manage is missing)."));
    return;
  }
  const tokens = tokensSection(ctx);
  const sessions = sessionsSection();
  main.replaceChildren(
    heading,
    h(
      "p",
      { class: "sub" },
      "A personal access token acts as you with the API and the wsp CLI (Authorization: Bearer …). Its permissions are never more than your role's in the organization it is used with.",
    ),
    tokens.section,
    sessions.section,
  );
  await Promise.all([tokens.load(), sessions.load()]);
}

/** @param {import("./app.js").Ctx} ctx */
function tokensSection(ctx) {
  const status = h("p", { role: "status" }, "Loading…");
  const rows = h("tbody", {});
  const table = h(
    "table",
    { class: "tokens" },
    h("caption", { class: "visually-hidden" }, "Your active tokens, oldest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Name", "Permissions", "Expires", "Created", "Actions"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );
  const shown = h("div", {});

  async function load() {
    try {
      /** @type {Token[]} */
      const all = [];
      let cursor = null;
      do {
        const query = new URLSearchParams({ limit: "100" });
        if (cursor) query.set("cursor", cursor);
        const page = await api("GET", `/tokens?${query}`);
        all.push(...page.items);
        cursor = page.nextCursor;
      } while (cursor);
      rows.replaceChildren(...all.map(row));
      status.textContent = all.length === 0 ? "No tokens." : `${all.length} token${all.length === 1 ? "" : "s"}.`;
    } catch (e) {
      rows.replaceChildren();
      status.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  /** @param {Token} t */
  function row(t) {
    const revoke = h("button", { type: "button", class: "secondary small" }, "Revoke", h("span", { class: "visually-hidden" }, ` ${t.name}`));
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const controls = h("div", { class: "actions" }, revoke);
    revoke.addEventListener("click", () => {
      error.hidden = true;
      const confirm = h("button", { type: "button", class: "small" }, "Revoke", h("span", { class: "visually-hidden" }, ` ${t.name}`), " now");
      const cancel = h("button", { type: "button", class: "secondary small" }, "Keep");
      const question = h(
        "div",
        {},
        h("span", { class: "confirm-text" }, "Refused from its next request on. A session signed in with it ends too."),
        h("div", { class: "actions" }, confirm, cancel),
      );
      controls.replaceWith(question);
      confirm.focus();
      cancel.addEventListener("click", () => {
        question.replaceWith(controls);
        revoke.focus();
      });
      confirm.addEventListener("click", async () => {
        try {
          await api("DELETE", `/tokens/${encodeURIComponent(t.id)}`);
          await load();
          status.textContent = `${t.name} was revoked.`;
          form.querySelector("input")?.focus();
        } catch (e) {
          question.replaceWith(controls);
          error.textContent = explain(e);
          error.hidden = false;
          revoke.focus();
        }
      });
    });
    return h(
      "tr",
      { "data-token": t.id },
      h("th", { scope: "row" }, t.name, h("span", { class: "sub" }, h("code", {}, `${t.displayPrefix}…`))),
      h("td", {}, t.scopes === null ? "Every permission of your role" : t.scopes.map((s) => h("code", { class: "scope" }, s))),
      h("td", {}, t.expiresAt ? when(t.expiresAt) : "Never"),
      h("td", {}, when(t.createdAt)),
      h("td", { class: "row-actions" }, controls, error),
    );
  }

  // The form.
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "200", autocomplete: "off" });
  const scopeGroup = uid("scope-mode");
  const all = h("input", { type: "radio", name: scopeGroup, value: "all", checked: true });
  const some = h("input", { type: "radio", name: scopeGroup, value: "some" });
  all.id = uid("f");
  some.id = uid("f");
  const held = ctx.me.tags;
  const boxes = held.map((tag) => {
    const box = h("input", { type: "checkbox", value: tag, id: uid("scope"), disabled: true });
    return { tag, box, el: h("label", { class: "check", for: box.id }, box, " ", h("code", {}, tag)) };
  });
  const scopesFieldset = h(
    "fieldset",
    { class: "scopes", name: "scopes", tabindex: "-1" },
    h("legend", {}, "Permissions"),
    h("label", { class: "check", for: all.id }, all, " Every permission your role grants (as it changes)"),
    h("label", { class: "check", for: some.id }, some, " Only these (its scopes):"),
    h(
      "div",
      { class: "scope-list" },
      boxes.map((b) => b.el),
    ),
  );
  const syncScopes = () => {
    for (const b of boxes) b.box.disabled = !some.checked;
  };
  all.addEventListener("change", syncScopes);
  some.addEventListener("change", syncScopes);
  const expires = h("input", { type: "date", name: "expiresAt", min: new Date(Date.now() + 86_400_000).toISOString().slice(0, 10) });
  const form = h(
    "form",
    { novalidate: true },
    field("Name", name, "What it is for, e.g. “CI deploys”."),
    scopesFieldset,
    field("Expires on (optional)", expires, "The end of that day, your time. Empty: it never expires (unless the session creating it does first)."),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Create token")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    shown.replaceChildren();
    /** @type {{name: string, scopes?: string[], expiresAt?: string}} */
    const body = { name: name.value.trim() };
    if (some.checked) body.scopes = boxes.filter((b) => b.box.checked).map((b) => b.tag);
    // The API would mint a token with no scope at all, which can do nothing: ask for one instead.
    if (body.scopes?.length === 0) {
      showFieldError(scopesFieldset, "Choose at least one permission, or every permission of your role.");
      scopesFieldset.focus();
      return;
    }
    if (expires.value) body.expiresAt = new Date(`${expires.value}T23:59:59`).toISOString();
    try {
      const created = await api("POST", "/tokens", body);
      // The next token starts from the defaults, not from this one's choices.
      name.value = "";
      expires.value = "";
      all.checked = true;
      for (const b of boxes) b.box.checked = false;
      syncScopes();
      const card = shownOnce(
        `Token ${created.name}`,
        [
          {
            label: "Token",
            value: created.token,
            hint: `Use it as Authorization: Bearer …, or with wsp login. ${created.expiresAt ? `Expires ${when(created.expiresAt)}.` : "Never expires."}`,
          },
        ],
        () => name.focus(),
      );
      shown.replaceChildren(card);
      card.focus();
      await load();
    } catch (e) {
      showProblem(form, e, { scopes: scopesFieldset });
    }
  });

  const section = h(
    "section",
    { "aria-labelledby": "tokens-heading" },
    h("h2", { id: "tokens-heading" }, "Personal access tokens"),
    status,
    h("div", { class: "table-wrap" }, table),
    h("h3", {}, "Create a token"),
    form,
    shown,
  );
  return { section, load };
}

function sessionsSection() {
  const status = h("p", { role: "status" }, "Loading…");
  const rows = h("tbody", {});
  const others = h("button", { type: "button", class: "secondary", hidden: true }, "Sign out everywhere else");
  const table = h(
    "table",
    { class: "sessions" },
    h("caption", { class: "visually-hidden" }, "Your signed-in browser sessions, oldest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Browser", "Signed in", "Last used", "Ends", "Actions"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    rows,
  );
  /** @type {Session[]} */
  let current = [];

  async function load() {
    try {
      /** @type {{items: Session[]}} */
      const list = await api("GET", "/auth/sessions");
      current = list.items;
      rows.replaceChildren(...list.items.map(row));
      const elsewhere = list.items.filter((s) => !s.current).length;
      others.hidden = elsewhere === 0;
      status.textContent = `${list.items.length} session${list.items.length === 1 ? "" : "s"}${elsewhere ? `, ${elsewhere} elsewhere` : ""}.`;
    } catch (e) {
      rows.replaceChildren();
      status.replaceChildren(h("span", { role: "alert" }, explain(e)));
    }
  }

  /** @param {Session} s */
  function row(s) {
    const label = s.current ? "this browser" : `session from ${when(s.createdAt)}`;
    const end = h("button", { type: "button", class: "secondary small" }, "Sign out", h("span", { class: "visually-hidden" }, ` ${label}`));
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    end.addEventListener("click", async () => {
      error.hidden = true;
      try {
        // The current one: its cookie is refused from the next call on, which takes this page to sign-in.
        await api("DELETE", `/auth/sessions/${encodeURIComponent(s.id)}`);
        if (s.current) {
          await api("GET", "/me").catch(() => {});
          return;
        }
        await load();
        status.textContent = `Signed out the ${label}. ${status.textContent}`;
        if (others.hidden) /** @type {HTMLElement | null} */ (rows.querySelector("button"))?.focus();
        else others.focus();
      } catch (e) {
        error.textContent = explain(e);
        error.hidden = false;
      }
    });
    return h(
      "tr",
      { "data-session": s.id },
      h(
        "th",
        { scope: "row" },
        browserName(s.userAgent),
        s.current ? h("span", { class: "badge current" }, "this browser") : null,
        h("span", { class: "sub" }, s.signedInWith === "token" ? "Signed in with a token" : "Signed in with an e-mailed code"),
      ),
      h("td", {}, when(s.createdAt)),
      h("td", {}, when(s.lastSeenAt)),
      h("td", {}, when(s.idleExpiresAt), h("span", { class: "sub" }, `if unused; at the latest ${when(s.expiresAt)}`)),
      h("td", { class: "row-actions" }, end, error),
    );
  }

  others.addEventListener("click", async () => {
    const failed = [];
    for (const s of current.filter((x) => !x.current)) {
      try {
        await api("DELETE", `/auth/sessions/${encodeURIComponent(s.id)}`);
      } catch (e) {
        failed.push(explain(e));
      }
    }
    await load();
    status.textContent = failed.length ? `Some sessions could not be ended: ${failed.join(" ")}` : "Signed out everywhere else.";
    /** @type {HTMLElement | null} */ (rows.querySelector("button"))?.focus();
  });

  const section = h(
    "section",
    { "aria-labelledby": "sessions-heading" },
    h("h2", { id: "sessions-heading" }, "Sessions"),
    h("p", { class: "sub" }, "Browsers signed in to this console as you. Signing one out takes it back to the sign-in page at its next request."),
    status,
    h("div", { class: "table-wrap" }, table),
    others,
  );
  return { section, load };
}
