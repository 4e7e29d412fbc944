/**
 * Local-folder projects (self-hosted only): scan a folder on the instance's
 * machine, import it as a project, list those projects. Mounted by the Node
 * adapter as an extra router, with the local-folders service
 * (functions/local-folders/service.ts) in `c.get("services").localFolders`; on the cloud
 * these paths are unknown routes (404). The operator names the folders the API
 * may read with LOCAL_ROOTS; unset, the three routes answer 409.
 */
import type { z } from "@hono/zod-openapi";
import { ApiError, badRequest } from "../../shared/http/errors";
import { DEFAULT_LIMIT, MAX_LIMIT, PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import type { AppContext } from "../../shared/http/context";
import type { LocalFolders } from "../../shared/storage/local-folders";
import { SCAN_LIMITS } from "../../shared/storage/limits";
import { ComposeError, LIMITS as COMPOSE_LIMITS, parseCompose } from "../projects/folder/compose";
import { COMPOSE_OVERRIDES, composeFileOf, detect, MANIFEST_NAMES } from "../projects/folder/detect";
import { serviceView } from "../projects/folder/services";
import { configReservedSlugs } from "../projects/slug";
import { projectView } from "../projects/store";
import { ImportBody, LOCAL_ROOTS_OFF, LocalProjectItem, LocalProjectSchema, LocalScanSchema, MAX_WALK_ENTRIES, ScanBody } from "./schema";
import { createLocalProject, listLocalProjects } from "./store";

const TAGS = ["Local folders (self-hosted)"];
const CONFLICT_409 = { description: "Local folders are off on this instance (LOCAL_ROOTS unset)" };

const PATH_RULES =
  "`path` must be an absolute path of a folder under one of the instance's `LOCAL_ROOTS` (compared with the roots' real paths): " +
  "a relative path, a `..` segment, a path outside every root, a symbolic link (anywhere in the path) whose target is outside every root, a file, or a path that does not exist is 400 naming `path`, and nothing in the folder is read. " +
  "Without `LOCAL_ROOTS` the route answers 409 saying how to enable it. Self-hosted only: on the cloud this route does not exist (404).";

const scan = defineRoute({
  method: "post",
  path: "/projects/scan",
  tags: TAGS,
  summary: "Detect the build configuration of a local folder",
  description: [
    "The same detector as the folder-upload scan: stack, framework, package manager, install/build/start commands, output directory, Dockerfile, and for a compose folder its `services` with every environment value masked (`••••••••`). Nothing is recorded.",
    `Bounded reads: the walk is breadth-first, never enters \`.git\` or \`node_modules\`, reads at most ${MAX_WALK_ENTRIES} entries and 4 levels (over that it stops and answers \`truncated: true\`, the detectors having seen the root level first); only the root-level manifests the detector needs are read (regular files, a manifest over ${SCAN_LIMITS.maxManifestBytes / 1024 / 1024} MiB or a compose file over ${COMPOSE_LIMITS.fileBytes / 1024} KiB is 400); symbolic links are neither followed nor listed.`,
    PATH_RULES,
  ].join("\n\n"),
  permission: "project:write",
  request: { body: jsonRequest(ScanBody) },
  responses: { 200: jsonResponse(LocalScanSchema, "What was detected"), 409: CONFLICT_409 },
});

const importRoute = defineRoute({
  method: "post",
  path: "/projects/import",
  tags: TAGS,
  summary: "Record a project whose source is a local folder",
  description: [
    "Records a project exactly as POST /api/projects does (its production environment, the free route, the slug from `name`), with the folder's real path as the project's `localPath`: `path` is the create body's local-path field. `name` defaults to the folder's name; `framework` and `buildCommand` as in the create body; git fields are refused (the folder is the source). Does not deploy.",
    "Each deployment (POST /api/deployments) snapshots the folder when it is queued: a gzipped tarball of its files honouring `.gitignore` (any depth) and the root `.dockerignore`, without `.git/`, symbolic links or special files, stored as the deployment's artifact (source `local`). A folder that is gone by then is 409.",
    PATH_RULES,
  ].join("\n\n"),
  permission: "project:write",
  request: { body: jsonRequest(ImportBody) },
  responses: { 201: jsonResponse(LocalProjectSchema, "The new project (status `created`)"), 409: CONFLICT_409 },
});

const LocalProjectPage = pageOf(LocalProjectItem, "LocalProjectPage");

const list = defineRoute({
  method: "get",
  path: "/projects/local",
  tags: TAGS,
  summary: "The organization's local-folder projects",
  description: `Projects whose source is a local folder, with the folder and whether it still exists (as a folder under an allowed root: a folder removed, replaced by a file, or left out of LOCAL_ROOTS since reads \`exists: false\`). Oldest first; \`limit\` 1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}; pass \`nextCursor\` as \`cursor\`. Without \`LOCAL_ROOTS\`: 409 saying how to enable it. Self-hosted only: on the cloud this route does not exist (404).`,
  permission: "project:read",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(LocalProjectPage, "One page of local-folder projects"), 409: CONFLICT_409 },
});

/** The service with at least one root, else 409 saying how to enable it. */
function foldersOf(c: AppContext): LocalFolders {
  const folders = c.get("services").localFolders;
  if (!folders || folders.roots.length === 0) throw new ApiError("conflict", LOCAL_ROOTS_OFF);
  return folders;
}

export const localFoldersRouter = createRouter()
  .openapi(list, async (c) => {
    const folders = foldersOf(c);
    const { limit, cursor } = c.req.valid("query");
    const rows = await listLocalProjects(c.get("db"), callerOf(c).orgId, limit, cursor);
    const page = toPage(rows, limit, (p) => p.id);
    const items = await Promise.all(
      page.items.map(async (p) => ({
        id: p.id,
        name: p.name,
        slug: p.slug,
        localPath: p.localPath!,
        exists: await folders.exists(p.localPath!),
        createdAt: p.createdAt.toISOString(),
      })),
    );
    return c.json({ items, nextCursor: page.nextCursor }, 200);
  })
  .openapi(scan, async (c) => {
    const folders = foldersOf(c);
    const folder = await folders.read(c.req.valid("json").path, MANIFEST_NAMES);
    const file = composeFileOf(folder);
    let services: z.infer<typeof LocalScanSchema>["services"];
    if (file) {
      const overrideName = COMPOSE_OVERRIDES[file]!;
      const override = folder.manifests.get(overrideName);
      try {
        const parsed = parseCompose({ file, text: folder.manifests.get(file)! }, override === undefined ? undefined : { file: overrideName, text: override });
        services = parsed.services.map(({ name, envKeys, ...spec }) => serviceView(name, spec, envKeys));
      } catch (e) {
        if (e instanceof ComposeError) throw badRequest(undefined, `The compose file is not usable: ${e.message}`);
        throw e;
      }
    }
    return c.json(
      {
        path: folder.path,
        ...detect(folder),
        composeFile: file,
        ...(services ? { services } : {}),
        files: folder.files,
        entries: folder.entries,
        truncated: folder.truncated,
      },
      200,
    );
  })
  .openapi(importRoute, async (c) => {
    const folders = foldersOf(c);
    const body = c.req.valid("json");
    const real = await folders.resolve(body.path);
    const name = body.name ?? ((real.split("/").pop() ?? "").trim().slice(0, 100) || "project");
    const options = body.buildCommand ? { buildCommand: body.buildCommand } : {};
    const row = await createLocalProject(
      c.get("db"),
      callerOf(c).orgId,
      { name, framework: body.framework },
      options,
      real,
      configReservedSlugs(c.get("config")),
    );
    return c.json({ ...(await projectView(c.get("db"), row, c.get("config"))), localPath: real }, 201);
  });
