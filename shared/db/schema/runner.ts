/**
 * The self-hosted runner's sandbox users: each project's build steps and apps
 * run under a host uid of its own (= gid), allocated from RUNNER_UID_RANGE the
 * first time one of its deployments runs, and kept while the project exists
 * (files its deployments wrote stay its own). Unique, so two projects never
 * share one; shared by every runner on the same database.
 */
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { createdAt } from "./columns";
import { organizations } from "./identity";
import { projects } from "./projects";

export const sandboxUids = pgTable("sandbox_uids", {
  projectId: text("project_id")
    .primaryKey()
    .references(() => projects.id, { onDelete: "cascade" }),
  orgId: text("org_id")
    .notNull()
    .references(() => organizations.id, { onDelete: "cascade" }),
  uid: integer("uid").notNull().unique(),
  createdAt: createdAt(),
});
