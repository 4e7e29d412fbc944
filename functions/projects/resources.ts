/**
 * Resources: CPU and memory for production and builds, disk, sleep mode, port.
 * PATCH and POST are the same operation; only the sent fields change, each in its
 * own column of one UPDATE, so concurrent writers of different fields lose nothing.
 */
import { z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { projects, SLEEP_MODES } from "../../shared/db/schema";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import type { AppContext } from "../../shared/http/context";
import { ProjectIdParam } from "./schema";
import { findProject, projectNotFound, type ProjectRow } from "./store";

export const LIMITS = {
  cpuCores: { min: 0.1, max: 4 },
  memoryMb: { min: 128, max: 16384 },
  diskGb: { min: 1, max: 100 },
  port: { min: 1, max: 65535 },
} as const;

const CpuCores = z.number().min(LIMITS.cpuCores.min).max(LIMITS.cpuCores.max).openapi({ description: "0.1-4 cores (fractions allowed)" });
const MemoryMb = z.number().int().min(LIMITS.memoryMb.min).max(LIMITS.memoryMb.max).openapi({ description: "128-16384 MB, whole megabytes" });
const DiskGb = z.number().int().min(LIMITS.diskGb.min).max(LIMITS.diskGb.max).openapi({ description: "Persistent disk, 1-100 GB" });
const Port = z.number().int().min(LIMITS.port.min).max(LIMITS.port.max).openapi({ description: "The port the app listens on, 1-65535" });
const SleepMode = z.enum(SLEEP_MODES).openapi({ description: "`auto_sleep`: scaled to zero when idle; `always_on`: kept running" });

const Allotment = z.object({ cpuCores: CpuCores, memoryMb: MemoryMb });

export const ResourcesSchema = z
  .object({
    production: Allotment.openapi({ description: "Allotment of the running app (defaults 1 core, 512 MB)" }),
    build: Allotment.openapi({ description: "Allotment of each build (defaults 2 cores, 2048 MB)" }),
    diskGb: DiskGb.openapi({ description: "Persistent disk in GB, 1-100 (default 10)" }),
    sleepMode: SleepMode,
    port: Port.openapi({ description: "Listen port, 1-65535 (default 3000)" }),
  })
  .openapi("ProjectResources");

const AllotmentPatch = z.strictObject({ cpuCores: CpuCores.optional(), memoryMb: MemoryMb.optional() });

export const ResourcesBody = z
  .strictObject({
    production: AllotmentPatch.optional(),
    build: AllotmentPatch.optional(),
    diskGb: DiskGb.optional(),
    sleepMode: SleepMode.optional(),
    port: Port.optional(),
  })
  .openapi("ProjectResourcesUpdate");

export function resourcesView(row: ProjectRow): z.infer<typeof ResourcesSchema> {
  return {
    production: { cpuCores: row.productionCpuCores, memoryMb: row.productionMemoryMb },
    build: { cpuCores: row.buildCpuCores, memoryMb: row.buildMemoryMb },
    diskGb: row.diskGb,
    sleepMode: row.sleepMode,
    port: row.port,
  };
}

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
  description: "`auto_sleep` or `always_on`; anything else is 400 naming the allowed values.",
  permission: "project:write",
  request: { params: ProjectIdParam, body: jsonRequest(z.strictObject({ sleepMode: SleepMode })) },
  responses: { 200: ok },
});

async function apply(c: AppContext, id: string, body: z.infer<typeof ResourcesBody>) {
  const { orgId } = callerOf(c);
  const set: Partial<typeof projects.$inferInsert> = {};
  if (body.production?.cpuCores !== undefined) set.productionCpuCores = body.production.cpuCores;
  if (body.production?.memoryMb !== undefined) set.productionMemoryMb = body.production.memoryMb;
  if (body.build?.cpuCores !== undefined) set.buildCpuCores = body.build.cpuCores;
  if (body.build?.memoryMb !== undefined) set.buildMemoryMb = body.build.memoryMb;
  if (body.diskGb !== undefined) set.diskGb = body.diskGb;
  if (body.sleepMode !== undefined) set.sleepMode = body.sleepMode;
  if (body.port !== undefined) set.port = body.port;
  if (Object.keys(set).length === 0) return resourcesView(await findProject(c.get("db"), orgId, id));
  const [row] = await c.get("db")
    .update(projects)
    .set({ ...set, updatedAt: c.get("clock")() })
    .where(and(eq(projects.id, id), eq(projects.orgId, orgId)))
    .returning();
  if (!row) throw projectNotFound();
  return resourcesView(row);
}

export const resourcesRouter = createRouter()
  .openapi(read, async (c) => c.json(resourcesView(await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id)), 200))
  .openapi(write("patch"), async (c) => c.json(await apply(c, c.req.valid("param").id, c.req.valid("json")), 200))
  .openapi(write("post"), async (c) => c.json(await apply(c, c.req.valid("param").id, c.req.valid("json")), 200))
  .openapi(sleepMode, async (c) => c.json(await apply(c, c.req.valid("param").id, c.req.valid("json")), 200));
