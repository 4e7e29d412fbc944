/**
 * POST /api/projects/:id/options: build/deploy options, merged like PATCH (send only
 * what changes, null goes back to detection). One `options || … - …` statement, so
 * concurrent writers of different options lose nothing. `buildCommand` is the same
 * value as the project's `buildCommand`.
 */
import { z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { projects, type ProjectOptions } from "../../shared/db/schema";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { Command, noControl, ProjectIdParam } from "./schema";
import { findProject, mergeOptions, projectNotFound } from "./store";

const OPTION_KEYS = ["rootDirectory", "installCommand", "buildCommand", "startCommand", "outputDirectory", "runtimeVersion"] as const;

/** A directory inside the source tree: relative, no `..`, `.` for the root. */
export function isRelativePath(p: string): boolean {
  if (p.startsWith("/") || p.includes("\\") || !noControl.test(p)) return false;
  return p.split("/").every((part) => part !== "..");
}

const RelativePath = z.string().trim().min(1).max(255).refine(isRelativePath, "must be a relative path inside the source (no leading '/', no '..')");
const RuntimeVersion = z
  .string()
  .trim()
  .min(1)
  .max(32)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+*-]*$/, "must look like a version, e.g. 22, 20.x or 3.12");

const field = <S extends z.ZodType>(schema: S, description: string) => schema.nullable().optional().openapi({ description });

export const OptionsBody = z
  .strictObject({
    rootDirectory: field(RelativePath, "Directory of the app inside the source, e.g. `apps/web`"),
    installCommand: field(Command, "e.g. `npm ci`"),
    buildCommand: field(Command, "e.g. `npm run build` (the project's buildCommand)"),
    startCommand: field(Command, "e.g. `node server.js`"),
    outputDirectory: field(RelativePath, "Build output, relative to rootDirectory, e.g. `dist`"),
    runtimeVersion: field(RuntimeVersion, "Language runtime version, e.g. `22`"),
  })
  .openapi("ProjectOptionsUpdate");

export const OptionsSchema = z
  .object(Object.fromEntries(OPTION_KEYS.map((k) => [k, z.string().nullable()])) as Record<(typeof OPTION_KEYS)[number], z.ZodNullable<z.ZodString>>)
  .openapi("ProjectOptions", { description: "null: detected at build time" });

export const optionsView = (o: ProjectOptions) =>
  Object.fromEntries(OPTION_KEYS.map((k) => [k, o[k] ?? null])) as Record<(typeof OPTION_KEYS)[number], string | null>;

const route = defineRoute({
  method: "post",
  path: "/projects/{id}/options",
  tags: ["Projects"],
  summary: "Set build/deploy options (merged: send only what changes)",
  description:
    "Members: rootDirectory, installCommand, buildCommand, startCommand, outputDirectory (relative paths: no leading `/`, no `..`; commands: one line, at most 1024 characters), runtimeVersion. An omitted member is unchanged; null clears it (detected at build time).",
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
  if (Object.keys(set).length === 0 && cleared.length === 0) {
    return c.json(optionsView((await findProject(c.get("db"), orgId, id)).options), 200);
  }
  const [row] = await c.get("db")
    .update(projects)
    .set({ options: mergeOptions(set, cleared) as never, updatedAt: c.get("clock")() })
    .where(and(eq(projects.id, id), eq(projects.orgId, orgId)))
    .returning({ options: projects.options });
  if (!row) throw projectNotFound();
  return c.json(optionsView(row.options), 200);
});
