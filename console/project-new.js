// @ts-check
/**
 * #/projects/new: create a project three ways, in one form (one name, one choice of source):
 * - upload a folder chosen in the browser: packed into a gzipped tarball here (tar.js), then the
 *   steps `wsp deploy` takes (folder-upload.js), the progress in the status line;
 * - link a git repository: POST /api/projects, then POST …/git/link (checked on the host: its 400
 *   at the field it names), then optionally the first deployment (POST /api/deployments);
 * - import a folder on this machine (self-hosted with LOCAL_ROOTS): POST /api/projects/scan, then
 *   POST /api/projects/import, then optionally the first deployment. Offered only when
 *   GET /api/projects/local answers: the cloud has no such route (404), an instance without
 *   LOCAL_ROOTS says how to turn it on (409).
 * A bad name's 400 is shown at the name field, whichever step sent it. It ends with a link to the
 * new project. Without project:write the page says who can create one.
 */
import { api, ApiError } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showFieldError, showProblem } from "./forms.js";

/**
 * The packing and upload modules, loaded when a folder is chosen: every console module is fetched
 * with the first page (app.js imports them all), and the projects page has a transfer budget.
 */
const uploadModules = () => Promise.all([import("./tar.js"), import("./folder-upload.js")]);

/** @typedef {"upload" | "git" | "local"} Way */

const PROVIDERS = [
  ["github", "GitHub"],
  ["gitlab", "GitLab"],
  ["bitbucket", "Bitbucket"],
  ["gitea", "Gitea or Forgejo"],
];

const SUBMIT = { upload: "Upload and deploy", git: "Create and link", local: "Import folder" };

/** Whether this instance imports local folders: the route's answer says (see the module comment). @returns {Promise<{offered: boolean, why?: string}>} */
async function localFolders() {
  try {
    await api("GET", "/projects/local?limit=1");
    return { offered: true };
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return { offered: false, why: explain(e) };
    return { offered: false };
  }
}

/** @param {HTMLElement} main @param {import("./app.js").Ctx} ctx */
export async function newProjectPage(main, ctx) {
  document.title = "New project · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "New project");
  const back = h("p", {}, h("a", { href: "#/projects" }, "← All projects"));
  if (!ctx.can("project:write")) {
    main.replaceChildren(
      back,
      heading,
      h(
        "p",
        { class: "note" },
        `Your role (${ctx.role ?? "none"}) in this organization cannot create projects (it needs project:write): a member, admin or owner can.`,
      ),
    );
    return;
  }
  main.replaceChildren(back, heading, h("p", { role: "status" }, "Loading…"));
  const local = await localFolders();

  const name = h("input", { type: "text", name: "name", required: true, maxlength: "100", autocomplete: "off", spellcheck: "false" });
  /** @param {Way} value @param {string} text */
  const choice = (value, text) => h("label", { class: "check" }, h("input", { type: "radio", name: "way", value, checked: value === "upload" }), ` ${text}`);
  const ways = h(
    "fieldset",
    { class: "scopes" },
    h("legend", {}, "Source"),
    choice("upload", "Upload a folder from this computer"),
    choice("git", "Link a git repository"),
    local.offered ? choice("local", "Import a folder on the server's machine") : null,
    local.why ? h("p", { class: "sub" }, `Importing a folder on the server's machine is off here: ${local.why}`) : null,
  );

  // Upload
  const folder = h("input", { type: "file", name: "folder", webkitdirectory: true, multiple: true });
  const picked = h("p", { class: "sub", id: "folder-picked" }, "No folder chosen.");
  const upload = h(
    "fieldset",
    { "data-way": "upload" },
    h("legend", { class: "visually-hidden" }, "Folder"),
    field("Folder", folder, "Packed here and uploaded; .git, .wsp and node_modules folders are left out (the build installs dependencies)."),
    picked,
  );

  // Git
  const provider = h(
    "select",
    { name: "provider" },
    PROVIDERS.map(([value, text]) => h("option", { value }, text)),
  );
  const owner = h("input", { type: "text", name: "owner", autocomplete: "off", spellcheck: "false" });
  const repo = h("input", { type: "text", name: "repo", autocomplete: "off", spellcheck: "false" });
  const branch = h("input", { type: "text", name: "branch", autocomplete: "off", spellcheck: "false" });
  const deployGit = h("input", { type: "checkbox", name: "deployNow", checked: true });
  const git = h(
    "fieldset",
    { "data-way": "git", hidden: true, disabled: true },
    h("legend", { class: "visually-hidden" }, "Repository"),
    h(
      "div",
      { class: "stack" },
      field("Git host", provider),
      field("Owner", owner, "The user or organization (a group path on GitLab)"),
      field("Repository", repo),
      field("Branch to deploy", branch, "Optional: the repository's default branch when empty"),
    ),
    h("div", { class: "field" }, h("label", { class: "check" }, deployGit, " Deploy the branch now")),
  );

  // Local folder
  const path = h("input", { type: "text", name: "path", autocomplete: "off", spellcheck: "false" });
  const deployLocal = h("input", { type: "checkbox", name: "deployLocal", checked: true });
  const localSet = local.offered
    ? h(
        "fieldset",
        { "data-way": "local", hidden: true, disabled: true },
        h("legend", { class: "visually-hidden" }, "Folder on the server"),
        field("Folder path", path, "An absolute path under one of the server's LOCAL_ROOTS"),
        h("div", { class: "field" }, h("label", { class: "check" }, deployLocal, " Deploy it now")),
      )
    : null;

  const submit = h("button", { type: "submit" }, SUBMIT.upload);
  const progress = h("p", { role: "status", class: "progress" });
  const unlinkedNote = h("p", { class: "note", hidden: true });
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "new-project-heading" },
    h("h2", { id: "new-project-heading", class: "visually-hidden" }, "Create a project"),
    field("Project name", name, "1 to 100 characters; the app's address is made from it"),
    ways,
    upload,
    git,
    localSet,
    h("div", { class: "actions" }, submit),
    progress,
    unlinkedNote,
  );
  const outcome = h("div", {});
  main.replaceChildren(
    back,
    heading,
    h("p", {}, "Start from a folder or a git repository; each deployment builds it and runs it at its own address."),
    form,
    outcome,
  );

  /** The way chosen now. @returns {Way} */
  const way = () => /** @type {Way} */ (/** @type {HTMLInputElement} */ (form.querySelector("input[name=way]:checked")).value);
  ways.addEventListener("change", () => {
    for (const set of [upload, git, localSet]) {
      if (!set) continue;
      const on = set.dataset.way === way();
      set.hidden = !on;
      set.disabled = !on;
    }
    submit.textContent = SUBMIT[way()];
    clearErrors(form);
  });

  /** The upload already sent and scanned when ensure refused it (a bad name): sent again as is. @type {any} */
  let resume = null;
  /** The project a git link created when the link itself was refused: linked again, not created twice. @type {{id: string, name: string} | null} */
  let unlinked = null;

  folder.addEventListener("change", async () => {
    resume = null;
    const loaded = await uploadModules().catch(() => null);
    if (!loaded) {
      picked.textContent = "The page could not load its upload code: reload and try again.";
      return;
    }
    const [{ humanSize, selectFiles }] = loaded;
    const files = Array.from(folder.files ?? []);
    const { kept, leftOut, root } = selectFiles(files);
    const size = kept.reduce((n, f) => n + f.size, 0);
    picked.textContent =
      files.length === 0
        ? "No folder chosen."
        : `${root}: ${kept.length} file${kept.length === 1 ? "" : "s"}, ${humanSize(size)}${leftOut.length ? `; left out: ${leftOut.join(", ")}` : ""}.`;
    if (!name.value.trim() && root) name.value = root.slice(0, 100);
  });

  /** @param {string} text */
  const say = (text) => {
    progress.textContent = text;
  };

  /** The last step: where the project is, and what was queued. @param {{id: string, name: string}} project @param {string} text */
  const done = (project, text) => {
    say("");
    // Emptied, so a second click cannot make the same project twice; the choice of source stays.
    name.value = "";
    folder.value = "";
    picked.textContent = "No folder chosen.";
    const open = h("a", { href: `#/projects/${encodeURIComponent(project.id)}` }, `Open ${project.name}`);
    outcome.replaceChildren(h("div", { class: "card", role: "status" }, h("p", { class: "saved" }, text), h("p", {}, open)));
    open.focus();
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    outcome.replaceChildren();
    const projectName = name.value.trim();
    if (!projectName) {
      showFieldError(name, "Enter a name for the project.");
      return name.focus();
    }
    submit.disabled = true;
    try {
      if (way() === "upload") await viaUpload(projectName);
      else if (way() === "git") await viaGit(projectName);
      else await viaLocal(projectName);
    } finally {
      submit.disabled = false;
    }
  });

  /** @param {string} projectName */
  async function viaUpload(projectName) {
    const files = Array.from(folder.files ?? []);
    if (files.length === 0) {
      showFieldError(folder, "Choose the folder to upload.");
      return folder.focus();
    }
    let known = (/** @type {unknown} */ _e) => false;
    try {
      const [{ humanSize, PackError, packFiles, selectFiles }, { UploadError, uploadFolder }] = await uploadModules();
      // Errors about the folder itself (too large, an object-storage instance) are shown at the folder field.
      known = (e) => e instanceof PackError || e instanceof UploadError;
      const { kept, root } = selectFiles(files);
      let tarball = new Blob();
      if (!resume) {
        let shown = -1;
        tarball = await packFiles(kept, (read, total) => {
          const percent = Math.floor((read / total) * 10) * 10;
          if (percent === shown) return;
          shown = percent;
          say(`Packing ${kept.length} files: ${percent} %…`);
        });
        say(`Packed into ${humanSize(tarball.size)}.`);
      }
      const result = await uploadFolder({ name: projectName, folder: root, tarball, say, resume: resume ?? undefined });
      resume = null;
      const what = `Created ${result.project.name} from the folder ${root}`;
      if (result.deployment) done(result.project, `${what}; deployment ${result.deployment.id} is ${result.deployment.status}.`);
      else done(result.project, `${what}, but its deployment was not queued: ${explain(result.queueError)}`);
    } catch (e) {
      say("");
      if (e && typeof e === "object" && "resume" in e) resume = e.resume;
      if (known(e) && e instanceof Error) {
        showFieldError(folder, e.message);
        folder.focus();
      } else showProblem(form, e);
    }
  }

  /** @param {string} projectName */
  async function viaGit(projectName) {
    /** @type {[HTMLInputElement, string][]} */
    const required = [
      [owner, "Enter the repository's owner."],
      [repo, "Enter the repository's name."],
    ];
    const missing = required.filter(([input]) => !input.value.trim());
    for (const [input, message] of missing) showFieldError(input, message);
    if (missing.length) return missing[0]?.[0].focus();
    unlinkedNote.hidden = true;
    try {
      say("Creating the project…");
      if (!unlinked) unlinked = await api("POST", "/projects", { name: projectName });
      else if (unlinked.name !== projectName) unlinked = await api("PATCH", `/projects/${encodeURIComponent(unlinked.id)}`, { name: projectName });
      const project = /** @type {{id: string, name: string}} */ (unlinked);
      say(`Checking ${owner.value.trim()}/${repo.value.trim()} on its host…`);
      const linked = await api("POST", `/projects/${encodeURIComponent(project.id)}/git/link`, {
        owner: owner.value.trim(),
        repo: repo.value.trim(),
        provider: provider.value,
        ...(branch.value.trim() ? { branch: branch.value.trim() } : {}),
      });
      unlinked = null;
      const what = `Created ${project.name}, linked to ${linked.owner}/${linked.repo} (branch ${linked.branch})`;
      if (!deployGit.checked) return done(project, `${what}.`);
      say("Queuing its first deployment…");
      try {
        const d = await api("POST", "/deployments", { projectId: project.id });
        done(project, `${what}; deployment ${d.id} is ${d.status}.`);
      } catch (e) {
        done(project, `${what}, but its deployment was not queued: ${explain(e)}`);
      }
    } catch (e) {
      say("");
      showProblem(form, e);
      // A project created before the link was refused: said, so that leaving the page is a choice.
      if (unlinked) {
        unlinkedNote.replaceChildren(
          `The project ${unlinked.name} was created without a repository: fix the repository and submit again to link it, or `,
          h("a", { href: `#/projects/${encodeURIComponent(unlinked.id)}` }, "open it"),
          ".",
        );
        unlinkedNote.hidden = false;
      }
    }
  }

  /** @param {string} projectName */
  async function viaLocal(projectName) {
    if (!path.value.trim()) {
      showFieldError(path, "Enter the folder's absolute path.");
      return path.focus();
    }
    try {
      say("Reading the folder…");
      const scan = await api("POST", "/projects/scan", { path: path.value.trim() });
      say("Creating the project…");
      const project = await api("POST", "/projects/import", {
        path: scan.path,
        name: projectName,
        ...(scan.framework && scan.framework !== "auto" ? { framework: scan.framework } : {}),
        ...(scan.buildCommand ? { buildCommand: scan.buildCommand } : {}),
      });
      const what = `Created ${project.name} from ${project.localPath}`;
      if (!deployLocal.checked) return done(project, `${what}.`);
      say("Queuing its first deployment…");
      try {
        const d = await api("POST", "/deployments", { projectId: project.id });
        done(project, `${what}; deployment ${d.id} is ${d.status}.`);
      } catch (e) {
        done(project, `${what}, but its deployment was not queued: ${explain(e)}`);
      }
    } catch (e) {
      say("");
      showProblem(form, e);
    }
  }
}
