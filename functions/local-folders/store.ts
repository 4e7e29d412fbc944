/** Local-folder projects: recorded with the create path's insertProject, plus their folder; listed per organization. */
import { and, asc, eq, gt, isNotNull } from "drizzle-orm";
import { projects } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import type { ProjectOptions } from "../../shared/db/schema";
import { insertProject, type ProjectRow } from "../projects/store";

/** Records the project (and its production environment) and its folder in one transaction. */
export async function createLocalProject(
  db: Db,
  orgId: string,
  fields: { name: string; framework?: string },
  options: ProjectOptions,
  localPath: string,
  reservedSlugs: readonly string[],
): Promise<ProjectRow> {
  return db.transaction(async (tx) => {
    const row = await insertProject(tx, orgId, fields, null, options, reservedSlugs);
    const [updated] = await tx.update(projects).set({ localPath }).where(eq(projects.id, row.id)).returning();
    return updated!;
  });
}

/** One page (limit + 1 rows) of the organization's local-folder projects, oldest first. */
export async function listLocalProjects(db: Db, orgId: string, limit: number, cursor?: string): Promise<ProjectRow[]> {
  return db
    .select()
    .from(projects)
    .where(and(eq(projects.orgId, orgId), isNotNull(projects.localPath), cursor ? gt(projects.id, cursor) : undefined))
    .orderBy(asc(projects.id))
    .limit(limit + 1);
}
