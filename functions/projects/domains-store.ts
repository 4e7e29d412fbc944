/** Custom domain rows. A hostname belongs to one project across the deployment; one domain per project is primary. */
import { and, count, eq, ne } from "drizzle-orm";
import { domains } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import { ApiError } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { findProject, type ProjectRow } from "./store";

export const MAX_DOMAINS = 50;

/**
 * Adds `hostname` to the caller's project (404 when it is not theirs) unless it is
 * there already, and makes it the primary domain; 409 when another project holds it
 * or the project has MAX_DOMAINS. Returns the project.
 */
export async function connectDomain(db: Db, orgId: string, projectId: string, hostname: string): Promise<ProjectRow> {
  return db.transaction(async (tx) => {
    // FOR UPDATE: one connect at a time per project, so exactly one domain ends primary.
    const project = await findProject(tx, orgId, projectId, "update");
    const [owner] = await tx.select({ projectId: domains.projectId }).from(domains).where(eq(domains.hostname, hostname));
    if (owner && owner.projectId !== project.id) throw new ApiError("conflict", `${hostname} is connected to another project`);
    if (!owner) {
      const [existing] = await tx.select({ n: count() }).from(domains).where(eq(domains.projectId, project.id));
      if (existing!.n >= MAX_DOMAINS) throw new ApiError("conflict", `A project can have at most ${MAX_DOMAINS} domains`);
      const inserted = await tx
        .insert(domains)
        .values({ id: newId("dom"), orgId, projectId: project.id, hostname })
        .onConflictDoNothing({ target: domains.hostname })
        .returning({ id: domains.id });
      // Taken by another project between the check and the insert.
      if (inserted.length === 0) throw new ApiError("conflict", `${hostname} is connected to another project`);
    }
    await tx
      .update(domains)
      .set({ isPrimary: false })
      .where(and(eq(domains.projectId, project.id), eq(domains.isPrimary, true), ne(domains.hostname, hostname)));
    await tx.update(domains).set({ isPrimary: true }).where(eq(domains.hostname, hostname));
    return project;
  });
}
