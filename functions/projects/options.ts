/**
 * POST /api/projects/:id/options: build/deploy options, merged like PATCH (send only
 * what changes, null goes back to detection). One `options || … - …` statement, so
 * concurrent writers of different options lose nothing. `buildCommand` is the same
 * value as the project's `buildCommand`.
 */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { Command, OPTION_KEYS, OptionsSchema, optionsView, ProjectIdParam, RelativePath } from "./schema";
import { mergeOptions, patchProject } from "./store";

const RuntimeVersion = z
  .string()
  .trim()
  .min(1)
  .max(32)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+*-]*$/, "must look like a version, e.g. 22, 20.x or 3.12");

/** A request path: `/` then printable ASCII without spaces (no CR/LF reaches the request line), at most 256 characters. */
const HealthCheckPath = z
  .string()
  .max(256)
  .regex(/^\/[\x21-\x7e]*$/, "must be a path starting with /, printable characters without spaces, e.g. /healthz");

const field = <S extends z.ZodType>(schema: S, description: string) => schema.nullable().optional().openapi({ description });

const OptionsBody = z
  .strictObject({
    rootDirectory: field(RelativePath, "Directory of the app inside the source, e.g. `apps/web`"),
    installCommand: field(Command, "e.g. `npm ci`"),
    buildCommand: field(Command, "e.g. `npm run build` (the project's buildCommand)"),
    startCommand: field(Command, "e.g. `node server.js`"),
    outputDirectory: field(RelativePath, "Build output, relative to rootDirectory, e.g. `dist`"),
    runtimeVersion: field(RuntimeVersion, "Language runtime version, e.g. `22`"),
    healthCheckPath: field(
      HealthCheckPath,
      "Where the runner checks a new app (self-hosted): a 2xx or 3xx answer to GET on this path is needed, e.g. `/healthz`; null: any HTTP answer to `/`",
    ),
  })
  .openapi("ProjectOptionsUpdate");

const route = defineRoute({
  method: "post",
  path: "/projects/{id}/options",
  tags: ["Projects"],
  summary: "Set build/deploy options (merged: send only what changes)",
  description:
    "Members: rootDirectory, installCommand, buildCommand, startCommand, outputDirectory (relative paths: no leading `/`, no `..`; commands: one line, at most 1024 characters), runtimeVersion, healthCheckPath (a path from `/`). An omitted member is unchanged; null clears it (detected at build time).",
  permission: "project:write",
  request: { params: ProjectIdParam, body: jsonRequest(OptionsBody) },
  responses: { 200: jsonResponse(OptionsSchema, "Every option after the merge") },
});

export const optionsRouter = createRouter().openapi(route, async (c) => {
  const { id } = c.req.valid("param");
  const { orgId } = callerOf(c);
  const body = c.req.valid("json");
  const set: Record<string, string> = {};
  const cleared: string[] = [];
  for (const key of OPTION_KEYS) {
    const value = body[key];
    if (value === null) cleared.push(key);
    else if (value !== undefined) set[key] = value;
  }
  const changed = Object.keys(set).length > 0 || cleared.length > 0;
  const row = await patchProject(c.get("db"), orgId, id, changed ? { options: mergeOptions(set, cleared) } : {}, c.get("clock")());
  return c.json(optionsView(row.options), 200);
});
