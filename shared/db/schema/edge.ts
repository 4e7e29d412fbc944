/**
 * The self-hosted edge: route rules a project's requests pass before they reach
 * its app (evaluated by the Node adapter's edge; the cloud has no such routes).
 */
import { boolean, index, jsonb, pgTable, text } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations } from "./identity";
import { projects } from "./projects";

export const ROUTE_RULE_KINDS = ["rate-limit", "ban", "allow-deny"] as const;
export type RouteRuleKind = (typeof ROUTE_RULE_KINDS)[number];

/** Kind-specific settings, validated by the API (functions/route-rules/schema.ts) before they are stored. */
export type RouteRuleConfig =
  | { limit: number; windowSeconds: number; by: "ip" }
  | { cidr: string; expiresAt: string | null; reason: string | null }
  | { mode: "allow" | "deny"; cidrs: string[] };

export const routeRules = pgTable(
  "route_rules",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: ROUTE_RULE_KINDS }).notNull(),
    /** Null: every path. A plain path is a prefix on segment boundaries; with `*` it is a glob. */
    path: text("path"),
    enabled: boolean("enabled").notNull().default(true),
    config: jsonb("config").$type<RouteRuleConfig>().notNull(),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [index("route_rules_project_idx").on(t.projectId, t.id)],
);
