/**
 * GET /api/projects/home: the organization's projects on this instance, and on a
 * self-hosted instance linked to the cloud the cloud organization's projects too,
 * merged in one keyset-paged list. Ids of both sides sort by creation time, so
 * one cursor (an id) pages both; a page never skips past what one side has not
 * shown yet (it stops at the smaller of the two sides' cursors).
 */
import { z } from "@hono/zod-openapi";
import type { AppContext } from "../../shared/http/context";
import { DEFAULT_LIMIT, MAX_LIMIT, PageQuery, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { ProjectSchema, type ProjectView } from "./schema";
import { listProjects, projectViews } from "./store";

export const HomePage = z
  .object({
    items: z.array(ProjectSchema),
    nextCursor: z.string().nullable().openapi({ description: "null on the last page" }),
    cloud: z
      .object({
        reachable: z.boolean(),
        reason: z.string().optional().openapi({ description: "Why the cloud's projects are missing from this page" }),
      })
      .optional()
      .openapi({ description: "Present on a self-hosted instance whose organization is linked to the cloud (PUT /api/cloud/link)" }),
  })
  .openapi("HomePage");

const home = defineRoute({
  method: "get",
  path: "/projects/home",
  tags: ["Projects"],
  summary: "Home feed: this instance's projects, and the linked cloud's",
  description: [
    "Each item's `location` says where the project lives. On a self-hosted instance whose organization is linked to a cloud organization (PUT /api/cloud/link), the cloud organization's projects are merged in, server-side: both sides are read a page at a time and merged by id (ids sort by creation time, oldest first). A page may hold fewer than `limit` items while `nextCursor` is not null (it never skips what one side has not shown yet).",
    "When the cloud cannot be read (unreachable, slower than 5 s, a refused token), the page holds this instance's projects only and `cloud: {reachable: false, reason}` says why: never an error. Cloud projects listed here become callable through this instance: their per-project routes are forwarded to the cloud.",
    `\`limit\` 1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}; pass \`nextCursor\` as \`cursor\` for the next page.`,
  ].join("\n\n"),
  permission: "project:list",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(HomePage, "One page of the home feed") },
});

async function homePage(c: AppContext, query: { limit: number; cursor?: string }): Promise<z.infer<typeof HomePage>> {
  const { limit, cursor } = query;
  const db = c.get("db");
  const cloudPage = c.get("services").cloud?.projects(c, limit, cursor);
  const localPage = toPage(await listProjects(db, callerOf(c).orgId, limit, cursor), limit, (p) => p.id);
  const local = await projectViews(db, localPage.items, c.get("config"));
  const cloud = await cloudPage;
  if (!cloud) return { items: local, nextCursor: localPage.nextCursor };
  if (!cloud.reachable) return { items: local, nextCursor: localPage.nextCursor, cloud: { reachable: false, reason: cloud.reason } };
  // Everything up to the smaller of the two cursors has been seen on both sides; past it, one side may still have older items.
  const cursors = [localPage.nextCursor, cloud.nextCursor].filter((x): x is string => x !== null);
  const bound = cursors.sort()[0];
  const merged = [...local, ...(cloud.items as ProjectView[])].filter((p) => bound === undefined || p.id <= bound).sort((a, b) => (a.id < b.id ? -1 : 1));
  const items = merged.slice(0, limit);
  const nextCursor = merged.length > limit ? items[items.length - 1]!.id : (bound ?? null);
  return { items, nextCursor, cloud: { reachable: true } };
}

export const homeRouter = createRouter().openapi(home, async (c) => c.json(await homePage(c, c.req.valid("query")), 200));
