/**
 * Resources: CPU and memory for production and builds, disk, sleep mode, port.
 * PATCH and POST are the same operation; only the sent fields change, each in its
 * own column of one UPDATE, so concurrent writers of different fields lose nothing.
 */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import type { AppContext } from "../../shared/http/context";
import { CpuCores, DiskGb, MemoryMb, Port, ProjectIdParam, ResourcesSchema, resourcesView, SleepMode } from "./schema";
import { findProject, patchProject, type ProjectSet } from "./store";

const AllotmentPatch = z.strictObject({ cpuCores: CpuCores.optional(), memoryMb: MemoryMb.optional() });

const ResourcesBody = z
  .strictObject({
    production: AllotmentPatch.optional(),
    build: AllotmentPatch.optional(),
    diskGb: DiskGb.optional(),
    sleepMode: SleepMode.optional(),
    port: Port.optional(),
  })
  .openapi("ProjectResourcesUpdate");

const ok = jsonResponse(ResourcesSchema, "The resources after the change");
const BOUNDS =
  "All fields optional; send only what changes. Bounds: `cpuCores` 0.1-4 (above 4 or not positive: 400 naming e.g. `production.cpuCores`), `memoryMb` 128-16384 (integer), `diskGb` 1-100 (integer), `port` 1-65535, `sleepMode` `auto_sleep` or `always_on`. Members of `build`: `cpuCores`, `memoryMb`.";

const write = (method: "patch" | "post") =>
  defineRoute({
    method,
    path: "/projects/{id}/resources",
    tags: ["Projects"],
    summary: method === "patch" ? "Update CPU/RAM/disk, sleep mode, port" : "Update resources (alias of the PATCH)",
    description: BOUNDS,
    permission: "project:write",
    request: { params: ProjectIdParam, body: jsonRequest(ResourcesBody) },
    responses: { 200: ok },
  });

const read = defineRoute({
  method: "get",
  path: "/projects/{id}/resources",
  tags: ["Projects"],
  summary: "CPU/RAM/disk configuration, sleep mode and port",
  permission: "project:read",
  request: { params: ProjectIdParam },
  responses: { 200: ok },
});

const sleepMode = defineRoute({
  method: "post",
  path: "/projects/{id}/sleep-mode",
  tags: ["Projects"],
  summary: "Set the sleep mode",
  description:
    "`auto_sleep` or `always_on`; anything else is 400 naming the allowed values. Self-hosted: applies at once (an `auto_sleep` app idle for SLEEP_AFTER is stopped within seconds; `always_on` wakes a sleeping app and keeps it running).",
  permission: "project:write",
  request: { params: ProjectIdParam, body: jsonRequest(z.strictObject({ sleepMode: SleepMode })) },
  responses: { 200: ok },
});

async function apply(c: AppContext, id: string, body: z.infer<typeof ResourcesBody>) {
  const { orgId } = callerOf(c);
  const set: ProjectSet = {};
  if (body.production?.cpuCores !== undefined) set.productionCpuCores = body.production.cpuCores;
  if (body.production?.memoryMb !== undefined) set.productionMemoryMb = body.production.memoryMb;
  if (body.build?.cpuCores !== undefined) set.buildCpuCores = body.build.cpuCores;
  if (body.build?.memoryMb !== undefined) set.buildMemoryMb = body.build.memoryMb;
  if (body.diskGb !== undefined) set.diskGb = body.diskGb;
  if (body.sleepMode !== undefined) set.sleepMode = body.sleepMode;
  if (body.port !== undefined) set.port = body.port;
  return resourcesView(await patchProject(c.get("db"), orgId, id, set, c.get("clock")()));
}

export const resourcesRouter = createRouter()
  .openapi(read, async (c) => c.json(resourcesView(await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id)), 200))
  .openapi(write("patch"), async (c) => c.json(await apply(c, c.req.valid("param").id, c.req.valid("json")), 200))
  .openapi(write("post"), async (c) => c.json(await apply(c, c.req.valid("param").id, c.req.valid("json")), 200))
  .openapi(sleepMode, async (c) => c.json(await apply(c, c.req.valid("param").id, c.req.valid("json")), 200));
