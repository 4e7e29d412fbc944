// @ts-check
/**
 * The project page's git card (docs/git.md): the linked repository and deploy branch
 * (GET /api/projects/{id}/git), the deployed commit against the branch head (…/commit-status, asked
 * of the host), auto-deploy with its webhook URL, and whether a clone token is set (…/clone-token:
 * never the token). With project:write: link a repository (…/git/link, its 400 at the field it
 * names), change the branch among the host's (…/branches, …/branch), turn auto-deploy on or off
 * (…/auto-deploy: the first turn on answers the signing secret, shown once with once.js). Setting
 * or clearing the clone token needs project:admin. Without these the card is read-only.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showFieldError, showProblem } from "./forms.js";
import { shownOnce } from "./once.js";

/**
 * @typedef {{linked: boolean, provider: string | null, owner: string | null, repo: string | null, cloneUrl: string | null, branch: string | null,
 *   defaultBranch: string | null, autoDeploy: boolean, webhookUrl: string | null, linkedAt: string | null,
 *   lastPush: {commit: string, branch: string | null, at: string} | null}} GitSource
 */

const HOSTS = { github: "GitHub", gitlab: "GitLab", bitbucket: "Bitbucket", gitea: "Gitea or Forgejo" };

const COMMIT_WORDS = {
  up_to_date: "Up to date: production runs the branch's head.",
  outdated: "Behind: the branch has moved on since the production deployment.",
  not_deployed: "Not deployed: no production deployment of this repository is ready yet.",
  unknown: "Unknown: the branch's head could not be read.",
};

const short = (/** @type {string | null} */ sha) => (sha ? sha.slice(0, 7) : "none");
const when = (/** @type {string} */ at) => new Date(at).toLocaleString();

/**
 * @param {string} id the project's id
 * @param {import("./app.js").Ctx} ctx
 * @returns {{section: HTMLElement, load: () => Promise<void>}}
 */
export function gitSection(id, ctx) {
  const base = `/projects/${encodeURIComponent(id)}`;
  const canWrite = ctx.can("project:write");
  const canAdmin = ctx.can("project:admin");
  const status = h("p", { role: "status" }, "Loading…");
  // An action's outcome: its own line, which the reload that follows the action does not rewrite.
  const outcome = h("p", { role: "status", class: "saved" });
  const body = h("div", {});
  // The secret shown once lives here, outside `body`: a reload of the card must not drop it.
  const once = h("div", {});
  const section = h(
    "section",
    { "aria-labelledby": "git-heading", class: "git-card" },
    h("h2", { id: "git-heading" }, "Git repository"),
    status,
    outcome,
    once,
    body,
  );

  /** Re-reads the card, then puts the focus back on the control the action started from. @param {string} [focus] a selector */
  async function reload(focus) {
    await load();
    if (focus) /** @type {HTMLElement | null} */ (body.querySelector(focus))?.focus();
  }

  async function load() {
    try {
      /** @type {GitSource} */
      const git = await api("GET", `${base}/git`);
      status.textContent = git.linked ? "" : "No repository linked.";
      body.replaceChildren(h("div", {}, git.linked ? linkedView(git) : null, canWrite ? linkForm(git) : null, cloneTokenPart()));
    } catch (e) {
      status.textContent = explain(e);
    }
  }

  /** @param {GitSource} git */
  function linkedView(git) {
    const host = HOSTS[/** @type {keyof typeof HOSTS} */ (git.provider)] ?? git.provider;
    const web = git.cloneUrl?.replace(/\.git$/, "");
    /** @param {string} term @param {import("./dom.js").Child} value */
    const item = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
    const commit = h("dd", {}, h("span", { role: "status" }, "Asking the host…"));
    const facts = h(
      "dl",
      { class: "facts" },
      item("Repository", [`${host} `, web ? h("a", { href: web, rel: "noreferrer" }, `${git.owner}/${git.repo}`) : `${git.owner}/${git.repo}`]),
      item("Deploy branch", [git.branch ?? "the default branch", git.defaultBranch && git.branch === git.defaultBranch ? " (the default)" : ""]),
      item("Linked", git.linkedAt ? when(git.linkedAt) : "named only, never checked on the host"),
      item("Last push", git.lastPush ? `${short(git.lastPush.commit)} on ${git.lastPush.branch ?? "?"}, ${when(git.lastPush.at)}` : "none received"),
      h("dt", {}, "Commit"),
      commit,
    );
    void commitStatus(commit);
    return [facts, canWrite ? branchPart(git) : null, autoDeployPart(git)];
  }

  /** @param {HTMLElement} dd */
  async function commitStatus(dd) {
    try {
      const s = await api("GET", `${base}/commit-status`);
      const words = COMMIT_WORDS[/** @type {keyof typeof COMMIT_WORDS} */ (s.status)] ?? s.status;
      dd.replaceChildren(
        h("span", { class: `badge commit-${s.status}` }, s.status.replace(/_/g, " ")),
        " ",
        words,
        h("span", { class: "sub" }, `Deployed ${short(s.deployedCommit)}, branch head ${short(s.remoteCommit)}${s.reason ? `: ${s.reason}` : ""}.`),
      );
    } catch (e) {
      dd.replaceChildren(explain(e));
    }
  }

  /**
   * The deploy branch, chosen among the host's branches. They are asked of the host only when the
   * user wants to change it: a page view does not wait on (or fail with) an unreachable host.
   * @param {GitSource} git
   */
  function branchPart(git) {
    const start = h("button", { type: "button", class: "secondary" }, "Change branch…");
    const error = h("p", { role: "alert", class: "field-error", hidden: true });
    const part = h("div", {}, start, error);
    start.addEventListener("click", async () => {
      start.disabled = true;
      error.hidden = true;
      let page;
      try {
        page = await api("GET", `${base}/branches?limit=100`);
      } catch (e) {
        error.textContent = explain(e);
        error.hidden = false;
        start.disabled = false;
        return;
      }
      const select = h(
        "select",
        { name: "branch" },
        page.items.map((/** @type {{name: string, isDefault: boolean}} */ b) =>
          h("option", { value: b.name, selected: b.name === git.branch }, b.name, b.isDefault ? " (default)" : ""),
        ),
      );
      const cancel = h("button", { type: "button", class: "secondary" }, "Keep ", git.branch ?? "the branch");
      const form = h(
        "form",
        { novalidate: true },
        field("Deploy branch", select, page.nextCursor ? "The first 100 branches by name" : undefined),
        h("div", { class: "actions" }, h("button", { type: "submit" }, "Set branch"), cancel),
      );
      part.replaceChildren(form);
      select.focus();
      cancel.addEventListener("click", () => {
        part.replaceChildren(start, error);
        start.disabled = false;
        start.focus();
      });
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        clearErrors(form);
        outcome.textContent = "";
        try {
          const after = await api("POST", `${base}/branch`, { branch: select.value });
          await reload("button.change-branch");
          outcome.textContent = `The deploy branch is ${after.branch}.`;
        } catch (e) {
          showProblem(form, e);
        }
      });
    });
    start.classList.add("change-branch");
    return part;
  }

  /** @param {GitSource} git */
  function autoDeployPart(git) {
    const toggle = h("button", { type: "button", class: "secondary", "aria-pressed": String(git.autoDeploy) }, "Deploy on push");
    const result = h("p", { role: "alert", class: "field-error", hidden: true });
    const part = h(
      "div",
      {},
      h("h3", {}, "Deploy on push"),
      h(
        "p",
        {},
        git.autoDeploy ? "On: a signed push to the deploy branch deploys it." : "Off: pushes do not deploy.",
        git.webhookUrl ? [" Webhook URL: ", h("code", { class: "webhook-url" }, git.webhookUrl)] : null,
      ),
      canWrite ? toggle : null,
      result,
    );
    toggle.addEventListener("click", async () => {
      toggle.disabled = true;
      outcome.textContent = "";
      try {
        const after = await api("POST", `${base}/auto-deploy`, { enabled: !git.autoDeploy });
        await reload("button[aria-pressed]");
        outcome.textContent = after.autoDeploy ? "Deploy on push is on." : "Deploy on push is off; the webhook URL stays valid for turning it on again.";
        if (after.webhookSecret) {
          const card = shownOnce(
            "Push webhook",
            [
              {
                label: "Webhook URL",
                value: after.webhookUrl,
                hint: "Paste it into the git host's webhook settings (content type application/json, push events).",
              },
              { label: "Signing secret", value: after.webhookSecret, hint: "The whole string, whsec_ included, is the webhook's secret." },
            ],
            () => /** @type {HTMLElement | null} */ (body.querySelector("button[aria-pressed]"))?.focus(),
          );
          once.replaceChildren(card);
          card.focus();
        }
      } catch (e) {
        toggle.disabled = false;
        result.textContent = explain(e);
        result.hidden = false;
      }
    });
    return part;
  }

  /** Link (or re-link) a repository: checked on its host. @param {GitSource} git */
  function linkForm(git) {
    const provider = h(
      "select",
      { name: "provider" },
      Object.entries(HOSTS).map(([value, text]) => h("option", { value, selected: value === (git.provider ?? "github") }, text)),
    );
    const owner = h("input", { type: "text", name: "owner", value: git.owner ?? "", autocomplete: "off", spellcheck: "false" });
    const repo = h("input", { type: "text", name: "repo", value: git.repo ?? "", autocomplete: "off", spellcheck: "false" });
    const branch = h("input", { type: "text", name: "branch", autocomplete: "off", spellcheck: "false" });
    const form = h(
      "form",
      { novalidate: true },
      h(
        "div",
        { class: "stack" },
        field("Git host", provider),
        field("Owner", owner),
        field("Repository", repo),
        field("Branch to deploy", branch, "Optional: the default branch when empty"),
      ),
      h("div", { class: "actions" }, h("button", { type: "submit" }, git.linked ? "Link this repository instead" : "Link repository")),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      outcome.textContent = "";
      try {
        const linked = await api("POST", `${base}/git/link`, {
          provider: provider.value,
          owner: owner.value.trim(),
          repo: repo.value.trim(),
          ...(branch.value.trim() ? { branch: branch.value.trim() } : {}),
        });
        await reload("button.change-branch");
        outcome.textContent = `Linked ${linked.owner}/${linked.repo}, branch ${linked.branch}.`;
      } catch (e) {
        showProblem(form, e);
      }
    });
    if (!git.linked) return h("div", {}, h("h3", {}, "Link a repository"), form);
    return h("details", {}, h("summary", {}, "Link another repository"), form);
  }

  /** Whether a clone token is set; set or clear it with project:admin. The token is never read back. */
  function cloneTokenPart() {
    const state = h("p", {}, "Loading…");
    const part = h("div", {}, h("h3", {}, "Clone token"), state);
    const token = h("input", { type: "password", name: "token", autocomplete: "off", spellcheck: "false" });
    const clear = h("button", { type: "button", class: "secondary" }, "Clear token");
    const form = h(
      "form",
      { novalidate: true },
      field("New clone token", token, "For a private repository; stored encrypted, never shown again."),
      h("div", { class: "actions" }, h("button", { type: "submit" }, "Save token"), clear),
    );
    /** @param {{hasToken: boolean, setAt: string | null}} t */
    const show = (t) => {
      state.textContent = t.hasToken
        ? `Set${t.setAt ? ` ${when(t.setAt)}` : ""}: clones use it.`
        : "None: clones use your Settings clone token when it is marked as the default, else none.";
      clear.hidden = !t.hasToken;
    };
    void api("GET", `${base}/clone-token`).then(show, (e) => {
      state.textContent = explain(e);
    });
    if (!canAdmin) {
      part.append(h("p", { class: "sub" }, `Setting it needs project:admin (an owner or admin); your role is ${ctx.role ?? "none"}.`));
      return part;
    }
    /** @param {string | null} value @param {string} message */
    const write = async (value, message) => {
      clearErrors(form);
      outcome.textContent = "";
      try {
        show(await api("PATCH", `${base}/clone-token`, { token: value }));
        token.value = "";
        outcome.textContent = message;
      } catch (e) {
        showProblem(form, e);
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      clearErrors(form);
      if (!token.value) {
        showFieldError(token, "Enter the token to save.");
        return token.focus();
      }
      void write(token.value, "Clone token saved.");
    });
    clear.addEventListener("click", () => void write(null, "Clone token cleared."));
    part.append(form);
    return part;
  }

  return { section, load };
}
