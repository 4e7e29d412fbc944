/**
 * GET /api/notifications/categories: the static registry of notification
 * categories, defined here and never stored. Subscriptions and org defaults key
 * on these ids; `defaultEnabled` seeds a new member's grid unless the
 * organization set its own default.
 */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";

export interface Category {
  id: string;
  label: string;
  /** What triggers an event of this category (and who sends it). */
  description: string;
  defaultEnabled: boolean;
  /** Whether something in the service produces events of this category today. */
  available: boolean;
  /** Why not, when `available` is false; null otherwise. */
  reason: string | null;
}

/**
 * A category nothing in the service emits yet (no backups, certificates, domain
 * registrations or usage limits exist to watch, no membership event is sent): listed
 * so a grid and POST /api/notifications/events can use it, off by default so no new
 * member's grid promises alerts that never come.
 */
const NOT_PRODUCED = "Nothing in the service produces this yet; only events sent with POST /api/notifications/events (your own tools) reach its subscribers.";
const unproduced = <Id extends string>(id: Id, label: string, description: string) =>
  ({ id, label, description, defaultEnabled: false, available: false, reason: NOT_PRODUCED }) as const;

export const CATEGORIES = [
  {
    id: "deploy.failed",
    label: "Deploy failed",
    description:
      "Sent by the runner when a deployment does not go live after its build: the app would not start, failed its health check or crashed within the smoke window. The previous version keeps serving. Build failed events reach its subscribers too.",
    defaultEnabled: true,
    available: true,
    reason: null,
  },
  {
    id: "deploy.succeeded",
    label: "Deploy succeeded",
    description: "Sent by the runner when a deployment passed its health check (and smoke window) and became its environment's live version.",
    defaultEnabled: false,
    available: true,
    reason: null,
  },
  {
    id: "build.failed",
    label: "Build failed",
    description:
      "Sent by the runner when a deployment's source, install or build step fails or runs past BUILD_TIMEOUT, before anything is started (Deploy failed subscribers hear of it too, once).",
    defaultEnabled: true,
    available: true,
    reason: null,
  },
  {
    id: "service.crashed",
    label: "Service crashed",
    description:
      "Sent when a running app is given up: it crashed too often in a row (crash loop), went over its disk limit, could not be started again after a restart of the server, or its build server was deleted.",
    defaultEnabled: true,
    available: true,
    reason: null,
  },
  unproduced("backup.failed", "Backup failed", "Would be sent when a scheduled or manual backup does not complete (the service has no backups yet)."),
  unproduced("backup.succeeded", "Backup succeeded", "Would be sent when a backup completes (the service has no backups yet)."),
  unproduced("domain.expiring", "Domain expiring", "Would be sent when a domain's registration expires soon (registrations are not watched yet)."),
  unproduced(
    "domain.misconfigured",
    "Domain misconfigured",
    "Would be sent when a domain's DNS stops pointing at the service, so it cannot be served or verified (DNS is not re-checked yet).",
  ),
  unproduced(
    "certificate.expiring",
    "Certificate expiring",
    "Would be sent when a TLS certificate expires soon and could not be renewed yet (the service issues no certificates yet).",
  ),
  unproduced(
    "certificate.renewal_failed",
    "Certificate renewal failed",
    "Would be sent when renewing a TLS certificate fails (the service issues no certificates yet).",
  ),
  unproduced(
    "usage.limit_approaching",
    "Usage limit approaching",
    "Would be sent when the organization nears a plan or resource limit (usage is not watched yet).",
  ),
  unproduced("member.joined", "Member joined", "Would be sent when someone joins the organization (joining does not send it yet)."),
] as const satisfies readonly Category[];

export type CategoryId = (typeof CATEGORIES)[number]["id"];

export const CATEGORY_IDS = CATEGORIES.map((c) => c.id) as [CategoryId, ...CategoryId[]];

const byId = new Map<string, Category>(CATEGORIES.map((c) => [c.id, c]));
export const categoryOf = (id: string): Category | undefined => byId.get(id);

/**
 * Narrow categories inside broader ones: a failed build is a deployment that did
 * not go live, so an event of `build.failed` reaches the subscribers of either
 * category (someone who asked for "Deploy failed" only must hear of a broken
 * build), as one event: a member subscribed to both is told once, and each of
 * their channels gets one send.
 */
const BROADER: Partial<Record<CategoryId, readonly CategoryId[]>> = { "build.failed": ["deploy.failed"] };

/** The categories whose subscribers an event of `id` reaches: its own and the broader ones it is part of. */
export const reachedCategories = (id: string): string[] => [id, ...(BROADER[id as CategoryId] ?? [])];

/** A category id in a request body: an unknown one is a 400 naming the allowed ids. */
export const CategoryField = z.enum(CATEGORY_IDS).openapi({ description: "A category id from GET /api/notifications/categories" });

export const CategorySchema = z
  .object({
    id: z.string(),
    label: z.string(),
    description: z.string().openapi({ description: "What triggers an event of this category, and what sends it" }),
    defaultEnabled: z.boolean().openapi({ description: "Whether a new member's in-app channel gets it, unless the organization set its own default" }),
    available: z
      .boolean()
      .openapi({ description: "Whether something in the service produces events of this category today; false: only POST /api/notifications/events does" }),
    reason: z.string().nullable().openapi({ description: "Why the category is not available (null when it is)" }),
  })
  .openapi("NotificationCategory");

const list = defineRoute({
  method: "get",
  path: "/notifications/categories",
  tags: ["Notifications"],
  summary: "List the notification categories (a static registry)",
  description:
    "Defined in code, not stored; the same for every organization. The list is complete (not paginated). Each description says what triggers the category. Categories with `available: false` have no producer in the service yet (`reason` says so): they can still be subscribed to and sent with POST /api/notifications/events, and are off by default.",
  permission: "notifications:read",
  responses: { 200: jsonResponse(z.object({ items: z.array(CategorySchema) }).openapi("NotificationCategoryList"), "Every category") },
});

export const categoriesRouter = createRouter().openapi(list, (c) => c.json({ items: CATEGORIES.map((cat) => ({ ...cat })) }, 200));
