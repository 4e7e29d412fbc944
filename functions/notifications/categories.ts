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
  description: string;
  defaultEnabled: boolean;
}

export const CATEGORIES = [
  {
    id: "deploy.failed",
    label: "Deploy failed",
    description: "A deployment did not go live (its build, start or health check failed); the previous version keeps serving.",
    defaultEnabled: true,
  },
  { id: "deploy.succeeded", label: "Deploy succeeded", description: "A deployment finished and is live.", defaultEnabled: false },
  {
    id: "build.failed",
    label: "Build failed",
    description: "A build stopped with an error before it could be deployed (Deploy failed subscribers hear of it too, once).",
    defaultEnabled: true,
  },
  { id: "service.crashed", label: "Service crashed", description: "A running service exited unexpectedly or keeps restarting.", defaultEnabled: true },
  { id: "backup.failed", label: "Backup failed", description: "A scheduled or manual backup did not complete.", defaultEnabled: true },
  { id: "backup.succeeded", label: "Backup succeeded", description: "A backup completed.", defaultEnabled: false },
  { id: "domain.expiring", label: "Domain expiring", description: "A domain's registration expires soon.", defaultEnabled: true },
  {
    id: "domain.misconfigured",
    label: "Domain misconfigured",
    description: "A domain's DNS no longer points at the service, so it cannot be served or verified.",
    defaultEnabled: true,
  },
  {
    id: "certificate.expiring",
    label: "Certificate expiring",
    description: "A TLS certificate expires soon and could not be renewed yet.",
    defaultEnabled: true,
  },
  { id: "certificate.renewal_failed", label: "Certificate renewal failed", description: "Renewing a TLS certificate failed.", defaultEnabled: true },
  {
    id: "usage.limit_approaching",
    label: "Usage limit approaching",
    description: "The organization is close to a plan or resource limit.",
    defaultEnabled: true,
  },
  { id: "member.joined", label: "Member joined", description: "Someone joined the organization.", defaultEnabled: false },
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
  .object({ id: z.string(), label: z.string(), description: z.string(), defaultEnabled: z.boolean() })
  .openapi("NotificationCategory");

const list = defineRoute({
  method: "get",
  path: "/notifications/categories",
  tags: ["Notifications"],
  summary: "List the notification categories (a static registry)",
  description: "Defined in code, not stored; the same for every organization. The list is complete (not paginated).",
  permission: "notifications:read",
  responses: { 200: jsonResponse(z.object({ items: z.array(CategorySchema) }).openapi("NotificationCategoryList"), "Every category") },
});

export const categoriesRouter = createRouter().openapi(list, (c) => c.json({ items: CATEGORIES.map((cat) => ({ ...cat })) }, 200));
