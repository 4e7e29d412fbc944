/**
 * The project records: list, create, read, update (the home feed is home.ts). Creating records
 * the project and its production environment; it never deploys (a first build goes
 * through the deployments API).
 */
import type { AppContext } from "../../shared/http/context";
import { pageOf, toPage, DEFAULT_LIMIT, MAX_LIMIT, PageQuery } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { CreateProjectBody, ProjectIdParam, ProjectSchema, STATUS_DOC, UpdateProjectBody } from "./schema";
import { configReservedSlugs } from "./slug";
import { withAudit } from "../operations/audit/record";
import { createProject, findProject, listProjects, mergeOptions, patchProject, projectView, projectViews, type ProjectSet } from "./store";

const TAGS = ["Projects"];
export const ProjectPage = pageOf(ProjectSchema, "ProjectPage");
const PAGING = `Oldest first (by id); \`limit\` 1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}; pass \`nextCursor\` as \`cursor\` for the next page.`;

const list = defineRoute({
  method: "get",
  path: "/projects",
  tags: TAGS,
  summary: "List the organization's projects",
  description: PAGING,
  permission: "project:list",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(ProjectPage, "One page of projects") },
});

const create = defineRoute({
  method: "post",
  path: "/projects",
  tags: TAGS,
  summary: "Create a project (records it; does not deploy)",
  description: `Only \`name\` is required. Defaults: framework \`auto\` (detected at build time), no source, default resources, a \`production\` environment, the free route \`<slug>.<shared domain>\` reserved but \`pending\` until synced. The slug is derived from the name (lower-case letters, digits and \`-\`, at most 40 characters, \`project\` when empty), unique across the deployment (a random 6-character suffix is added when taken) and never changes. ${STATUS_DOC}`,
  permission: "project:write",
  idempotent: true,
  request: { body: jsonRequest(CreateProjectBody) },
  responses: { 201: jsonResponse(ProjectSchema, "The new project (status `created`)") },
});

const get = defineRoute({
  method: "get",
  path: "/projects/{id}",
  tags: TAGS,
  summary: "A project: configuration, source, routes, status",
  description: STATUS_DOC,
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: jsonResponse(ProjectSchema, "The project") },
});

const update = defineRoute({
  method: "patch",
  path: "/projects/{id}",
  tags: TAGS,
  summary: "Update a project's configuration (any subset of the create body)",
  description:
    "Send only the fields to change; `null` clears an optional field (`framework` goes back to detection with `auto`). Each field is written by one statement touching only that field, so concurrent updates of different fields lose nothing. The slug and the free route do not follow a rename. `gitProvider`, `gitOwner`, `gitRepo` and `gitBranch` are recorded as given without asking the git host (the project then reads `git.linked: true` with `git.linkedAt: null`); POST /api/projects/{id}/git/link checks the repository on its host and detects its default branch.",
  permission: "project:write",
  request: { params: ProjectIdParam, body: jsonRequest(UpdateProjectBody) },
  responses: { 200: jsonResponse(ProjectSchema, "The updated project") },
});

async function page(c: AppContext, query: { limit: number; cursor?: string }) {
  const rows = await listProjects(c.get("db"), callerOf(c).orgId, query.limit, query.cursor);
  const { items, nextCursor } = toPage(rows, query.limit, (p) => p.id);
  return { items: await projectViews(c.get("db"), items, c.get("config")), nextCursor };
}

export const projectsCrudRouter = createRouter()
  .openapi(list, async (c) => c.json(await page(c, c.req.valid("query")), 200))
  .openapi(create, async (c) => {
    const body = c.req.valid("json");
    const gitProvider = body.gitProvider ?? (body.gitOwner && body.gitRepo ? "github" : null);
    const options = body.buildCommand ? { buildCommand: body.buildCommand } : {};
    const row = await withAudit(
      c,
      (tx) => createProject(tx, callerOf(c).orgId, body, gitProvider, options, configReservedSlugs(c.get("config"))),
      (row) => ({ action: "project.created", target: { kind: "project", id: row.id }, details: { slug: row.slug } }),
    );
    return c.json(await projectView(c.get("db"), row, c.get("config")), 201);
  })
  .openapi(get, async (c) => {
    const row = await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
  })
  .openapi(update, async (c) => {
    const { id } = c.req.valid("param");
    const { orgId } = callerOf(c);
    const { buildCommand, ...fields } = c.req.valid("json");
    const set: ProjectSet = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
    if (buildCommand !== undefined) {
      set.options = mergeOptions(buildCommand === null ? {} : { buildCommand }, buildCommand === null ? ["buildCommand"] : []);
    }
    const row = await patchProject(c.get("db"), orgId, id, set, c.get("clock")());
    return c.json(await projectView(c.get("db"), row, c.get("config")), 200);
  });
