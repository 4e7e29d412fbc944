// @ts-check
/**
 * Sign-in: an e-mailed one-time code (POST /api/auth/login, then /api/auth/verify), and on
 * self-hosted instances a personal access token pasted once (POST /api/auth/token). Which of
 * the two work here is asked once (GET /api/auth/methods): only those forms are shown, so no
 * request is sent that is known to fail; a server without e-mail says so in a sentence.
 */
import { api, ApiError } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, field, showFormError, showProblem } from "./forms.js";

/** @typedef {{email: boolean, token: boolean}} SignInMethods */

/** @type {Promise<SignInMethods> | undefined} */
let methods;
/** How one signs in here (asked once per page load); unknown (the server unreachable): both forms, their own errors say why. */
function signInMethods() {
  methods ??= api("GET", "/auth/methods").then(
    (m) => /** @type {SignInMethods} */ (m),
    () => {
      methods = undefined;
      return { email: true, token: true };
    },
  );
  return methods;
}

/**
 * @param {HTMLElement} main
 * @param {{signedIn: () => Promise<void>}} ctx
 */
export function signInPage(main, ctx) {
  document.title = "Sign in · Workspace";
  const email = h("input", { type: "email", name: "email", autocomplete: "email", required: true, maxlength: 320 });
  const noMail = h("p", { class: "card note", role: "note" });
  noMail.hidden = true;
  const emailForm = h(
    "form",
    { class: "card", "aria-labelledby": "code-heading", novalidate: true },
    h("h2", { id: "code-heading" }, "Sign in with an e-mailed code"),
    field("E-mail address", email),
    h("button", { type: "submit" }, "Send code"),
  );

  const code = h("input", { type: "text", name: "code", inputmode: "numeric", autocomplete: "one-time-code", required: true, maxlength: 32 });
  const sentTo = h("p", { role: "status" });
  const codeForm = h(
    "form",
    { class: "card", "aria-labelledby": "verify-heading", novalidate: true },
    h("h2", { id: "verify-heading" }, "Enter the code"),
    sentTo,
    field("Sign-in code", code, "6 digits, valid 10 minutes"),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, "Sign in"),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          onclick: () => {
            codeForm.hidden = true;
            emailForm.hidden = false;
            email.focus();
          },
        },
        "Use another address",
      ),
    ),
  );
  codeForm.hidden = true;

  const token = h("input", { type: "password", name: "token", autocomplete: "off", required: true, maxlength: 512, spellcheck: "false" });
  const tokenForm = h(
    "form",
    { class: "card", "aria-labelledby": "token-heading", novalidate: true },
    h("h2", { id: "token-heading" }, "Sign in with a personal access token"),
    h(
      "p",
      {},
      "Paste a personal access token (it starts with wsp_), for example the owner token the server printed when it first started, also saved as owner-token in its data folder. Signing out or revoking the token ends the session.",
    ),
    field("Personal access token", token),
    h("button", { type: "submit" }, "Sign in with token"),
  );
  tokenForm.hidden = true;

  emailForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(emailForm);
    if (!email.value.trim() || !email.validity.valid) return showProblem(emailForm, fieldProblem("email", "Enter an e-mail address, e.g. you@example.com"));
    try {
      const sent = await api("POST", "/auth/login", { email: email.value.trim() });
      sentTo.textContent = `${sent.detail} Sent to ${email.value.trim()}.`;
      emailForm.hidden = true;
      codeForm.hidden = false;
      code.value = "";
      clearErrors(codeForm);
      code.focus();
    } catch (e) {
      // E-mail was turned off since the page loaded: say so as the page would have.
      if (e instanceof ApiError && e.status === 503 && !tokenForm.hidden) {
        showFormError(emailForm, "This server cannot send e-mail, so it cannot send you a code. Sign in with a personal access token below.");
        token.focus();
      } else showProblem(emailForm, e);
    }
  });

  codeForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(codeForm);
    if (!code.value.trim()) return showProblem(codeForm, fieldProblem("code", "Enter the code from the e-mail"));
    try {
      await api("POST", "/auth/verify", { email: email.value.trim(), code: code.value });
      await ctx.signedIn();
    } catch (e) {
      showProblem(codeForm, e, { email: code });
    }
  });

  tokenForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(tokenForm);
    if (!token.value.trim()) return showProblem(tokenForm, fieldProblem("token", "Paste a personal access token"));
    try {
      await api("POST", "/auth/token", { token: token.value.trim() });
      token.value = "";
      await ctx.signedIn();
    } catch (e) {
      showProblem(tokenForm, e);
    }
  });

  emailForm.hidden = true;
  main.replaceChildren(h("h1", { tabindex: "-1" }, "Sign in"), h("div", { class: "stack" }, noMail, emailForm, codeForm, tokenForm));
  void signInMethods().then((m) => {
    emailForm.hidden = !m.email;
    tokenForm.hidden = !m.token;
    if (!m.email) {
      noMail.textContent = m.token
        ? "This server cannot send e-mail, so sign in with a personal access token."
        : "This server cannot send e-mail yet, so there is no way to sign in here. Its operator needs to set up e-mail first.";
      noMail.hidden = false;
    }
  });
}

/** A client-side check shown exactly like the API's own (at the named field). @param {string} name @param {string} detail */
function fieldProblem(name, detail) {
  return new ApiError(400, { status: 400, detail, field: name });
}
