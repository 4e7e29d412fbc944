/** Wire shapes of the local-folder routes (self-hosted). */
import { z } from "@hono/zod-openapi";
import { STACKS } from "../projects/folder/detect";
import { ServiceSchema } from "../projects/folder/schema";
import { Command, Framework, noControl, ProjectSchema } from "../projects/schema";

/** Entries the scan's walk looks at, at most (the tar reader lists as many paths for the detectors). */
export const MAX_WALK_ENTRIES = 20_000;

export const LOCAL_ROOTS_OFF =
  "Local folders are off on this instance: set LOCAL_ROOTS to a comma-separated list of absolute folders the API may read, and restart";

/** A folder on the instance's machine: absolute, under a LOCAL_ROOTS root. */
export const LocalPath = z
  .string()
  .min(1)
  .max(4096)
  .regex(noControl, "must not contain control characters")
  .openapi({ description: "An absolute path of a folder under one of the instance's LOCAL_ROOTS (no `..`; symbolic links must not lead out of the roots)" });

export const ScanBody = z.strictObject({ path: LocalPath }).openapi("LocalScanRequest");

/** The import body: the create body's fields (git fields excepted: the folder is the source) with `path`, the project's local path. */
export const ImportBody = z
  .strictObject({
    path: LocalPath,
    name: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .regex(noControl, "must not contain control characters")
      .optional()
      .openapi({ description: "1-100 characters; omitted: the folder's name" }),
    framework: Framework.optional(),
    buildCommand: Command.optional(),
  })
  .openapi("LocalImportRequest");

export const LocalScanSchema = z
  .object({
    path: z.string().openapi({ description: "The folder's real path (symbolic links resolved)" }),
    stack: z.enum(STACKS),
    framework: z.string(),
    packageManager: z.string().nullable(),
    installCommand: z.string().nullable(),
    buildCommand: z.string().nullable(),
    startCommand: z.string().nullable(),
    outputDirectory: z.string().nullable(),
    dockerfile: z.string().nullable(),
    composeFile: z.string().nullable(),
    services: z.array(ServiceSchema).optional().openapi({ description: "Present for a folder with a compose file; every environment value masked" }),
    files: z.number().int().openapi({ description: "Files the walk saw" }),
    entries: z.number().int().openapi({ description: "Files and directories the walk saw" }),
    truncated: z.boolean().openapi({ description: `The walk stopped after ${MAX_WALK_ENTRIES} entries; the detectors saw those (the root level first)` }),
  })
  .openapi("LocalScan");

export const LocalProjectSchema = ProjectSchema.extend({
  localPath: z.string().openapi({ description: "The folder the project deploys from (a snapshot is taken at each deployment)" }),
}).openapi("LocalProject");

export const LocalProjectItem = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    localPath: z.string(),
    exists: z.boolean().openapi({ description: "Whether the folder still exists as a folder under an allowed root" }),
    createdAt: z.string(),
  })
  .openapi("LocalProjectItem");
