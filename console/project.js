// @ts-check
/**
 * A project (GET /api/projects/{id}): its overview (project-overview.js: status, the app's address,
 * the deployment serving and the latest one apart), its git card (project-git.js), resources
 * (PATCH /api/projects/{id}/resources, bounds checked in the form before sending), its
 * environments with a form creating a preview (environments.js) and the env vars of an
 * environment (env-vars.js). Without project:write the forms are shown
 * read-only with the reason; a 403 that still happens (a role changed meanwhile) is explained.
 */
import { api, ApiError } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, explain, field, showFieldError, showProblem } from "./forms.js";
import { envVarsSection } from "./env-vars.js";
import { environmentsSection } from "./environments.js";
import { deleteSection } from "./project-delete.js";
import { domainsSection } from "./project-domains.js";
import { overviewSection } from "./project-overview.js";

/**
 * @typedef {{cpuCores: number, memoryMb: number}} Allotment
 * @typedef {{production: Allotment, build: Allotment, diskGb: number, sleepMode: string, port: number}} Resources
 */

/** The API's bounds (functions/projects/schema.ts), enforced here before anything is sent. */
const BOUNDS = {
  cpuCores: { min: 0.1, max: 4, step: "any", unit: "cores" },
  memoryMb: { min: 128, max: 16384, step: "1", unit: "MB" },
  diskGb: { min: 1, max: 100, step: "1", unit: "GB" },
  port: { min: 1, max: 65535, step: "1", unit: "" },
};

/**
 * @param {HTMLElement} main
 * @param {import("./app.js").Ctx} ctx
 * @param {string} id
 */
export async function projectPage(main, ctx, id) {
  document.title = "Project · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Project");
  const back = h("p", {}, h("a", { href: "#/projects" }, "← All projects"));
  main.replaceChildren(back, heading, h("p", { role: "status" }, "Loading…"));
  let project;
  try {
    project = await api("GET", `/projects/${encodeURIComponent(id)}`);
  } catch (e) {
    heading.textContent = e instanceof ApiError && e.status === 404 ? "Project not found" : "Project";
    main.replaceChildren(
      back,
      heading,
      h("p", { role: "alert" }, e instanceof ApiError && e.status === 404 ? "No project with this id in the selected organization." : explain(e)),
    );
    return;
  }
  document.title = `${project.name} · Workspace`;
  heading.textContent = project.name;
  const canWrite = ctx.can("project:write");
  const readOnly = canWrite
    ? null
    : h(
        "p",
        { class: "note", id: "read-only-note" },
        `Read-only: your role in this organization is ${ctx.role ?? "unknown"}, which does not include project:write. A member, admin or owner can change resources and variables.`,
      );
  const envVars = await envVarsSection(id, canWrite);
  const domains = domainsSection(id, canWrite);
  // Loaded with the page that shows it: app.js fetches every statically imported module with the first page, within a budget.
  const { gitSection } = await import("./project-git.js");
  const git = gitSection(id, ctx);
  main.replaceChildren(
    back,
    heading,
    h(
      "ul",
      { class: "plain page-links" },
      h("li", {}, h("a", { href: `#/projects/${encodeURIComponent(id)}/deployments` }, "Deployments"), " (history, build and runtime logs)"),
      h("li", {}, h("a", { href: `#/projects/${encodeURIComponent(id)}/requests` }, "HTTP requests"), " (server logs, live)"),
      h("li", {}, h("a", { href: `#/projects/${encodeURIComponent(id)}/rules` }, "Route rules"), " (rate limits, bans, allow and deny)"),
    ),
    readOnly ?? "",
    overviewSection(project, canWrite),
    git.section,
    resourcesSection(id, canWrite),
    environmentsSection(id, canWrite, () => envVars.dispatchEvent(new Event("environments-changed"))),
    envVars,
    domains.section,
    deleteSection(project, ctx),
  );
  await Promise.all([domains.load(), git.load()]);
}

/**
 * @param {string} id
 * @param {boolean} canWrite
 */
function resourcesSection(id, canWrite) {
  const section = h("section", { "aria-labelledby": "resources-heading" }, h("h2", { id: "resources-heading" }, "Resources"));
  /** @param {string} name @param {keyof typeof BOUNDS} kind */
  const num = (name, kind) => {
    const b = BOUNDS[kind];
    return h("input", { type: "number", name, min: b.min, max: b.max, step: b.step, required: true, inputmode: b.step === "any" ? "decimal" : "numeric" });
  };
  const inputs = {
    "production.cpuCores": num("production.cpuCores", "cpuCores"),
    "production.memoryMb": num("production.memoryMb", "memoryMb"),
    "build.cpuCores": num("build.cpuCores", "cpuCores"),
    "build.memoryMb": num("build.memoryMb", "memoryMb"),
    diskGb: num("diskGb", "diskGb"),
    port: num("port", "port"),
  };
  const sleepMode = h(
    "select",
    { name: "sleepMode" },
    h("option", { value: "auto_sleep" }, "Sleep when idle (auto_sleep)"),
    h("option", { value: "always_on" }, "Always on (always_on)"),
  );
  const saved = h("p", { role: "status", class: "saved" });
  const fields = h(
    "fieldset",
    { disabled: !canWrite, "aria-describedby": canWrite ? undefined : "read-only-note" },
    h("legend", { class: "visually-hidden" }, "Resources"),
    h(
      "div",
      { class: "grid" },
      field("Production CPU (cores)", inputs["production.cpuCores"], "0.1 to 4"),
      field("Production memory (MB)", inputs["production.memoryMb"], "128 to 16384"),
      field("Build CPU (cores)", inputs["build.cpuCores"], "0.1 to 4"),
      field("Build memory (MB)", inputs["build.memoryMb"], "128 to 16384"),
      field("Disk (GB)", inputs.diskGb, "1 to 100"),
      field("Port", inputs.port, "1 to 65535"),
      field("Sleep mode", sleepMode),
    ),
    h("button", { type: "submit" }, "Save resources"),
  );
  const form = h("form", { novalidate: true }, fields, saved);
  section.append(form);

  /** @type {Resources | undefined} */
  let current;
  /** @param {Resources} r */
  const fill = (r) => {
    current = r;
    inputs["production.cpuCores"].value = String(r.production.cpuCores);
    inputs["production.memoryMb"].value = String(r.production.memoryMb);
    inputs["build.cpuCores"].value = String(r.build.cpuCores);
    inputs["build.memoryMb"].value = String(r.build.memoryMb);
    inputs.diskGb.value = String(r.diskGb);
    inputs.port.value = String(r.port);
    sleepMode.value = r.sleepMode;
  };
  void api("GET", `/projects/${encodeURIComponent(id)}/resources`).then(fill, (e) => showProblem(form, e));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    saved.textContent = "";
    if (!current) return;
    /** @type {HTMLInputElement | undefined} */
    let firstBad;
    for (const [name, input] of Object.entries(inputs)) {
      const message = boundsMessage(input, BOUNDS[/** @type {keyof typeof BOUNDS} */ (name.split(".").pop())]);
      if (message) {
        showFieldError(input, message);
        firstBad ??= input;
      }
    }
    if (firstBad) return firstBad.focus();
    const r = current;
    /** @type {Record<string, any>} */
    const body = {};
    /** @param {"production" | "build"} group */
    const allotment = (group) => {
      const cpu = Number(inputs[`${group}.cpuCores`].value);
      const mem = Number(inputs[`${group}.memoryMb`].value);
      /** @type {Partial<Allotment>} */
      const changed = {};
      if (cpu !== r[group].cpuCores) changed.cpuCores = cpu;
      if (mem !== r[group].memoryMb) changed.memoryMb = mem;
      if (Object.keys(changed).length) body[group] = changed;
    };
    allotment("production");
    allotment("build");
    if (Number(inputs.diskGb.value) !== r.diskGb) body.diskGb = Number(inputs.diskGb.value);
    if (Number(inputs.port.value) !== r.port) body.port = Number(inputs.port.value);
    if (sleepMode.value !== r.sleepMode) body.sleepMode = sleepMode.value;
    if (Object.keys(body).length === 0) {
      saved.textContent = "No changes to save.";
      return;
    }
    try {
      fill(await api("PATCH", `/projects/${encodeURIComponent(id)}/resources`, body));
      saved.textContent = `Saved: ${Object.keys(body).join(", ")}.`;
    } catch (e) {
      showProblem(form, e);
    }
  });
  return section;
}

/**
 * The bounds message for an input, or "" when it is within them.
 * @param {HTMLInputElement} input
 * @param {{min: number, max: number, step: string, unit: string}} b
 */
function boundsMessage(input, b) {
  const range = `between ${b.min} and ${b.max}${b.unit ? ` ${b.unit}` : ""}`;
  if (input.validity.badInput || input.value.trim() === "") return `Enter a number ${range}.`;
  if (input.validity.rangeUnderflow || input.validity.rangeOverflow) return `Must be ${range}.`;
  if (input.validity.stepMismatch) return `Must be a whole number ${range}.`;
  return "";
}
