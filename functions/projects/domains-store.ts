/** Custom domain rows. A hostname belongs to one project across the deployment; one domain per project is primary. */
import { and, asc, count, desc, eq, ne } from "drizzle-orm";
import { domains } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { ApiError, notFound } from "../../shared/http/errors";
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

export type DomainRow = typeof domains.$inferSelect;

/** A project's domains: the primary first, then oldest first. */
export async function listDomains(ex: Executor, projectId: string): Promise<DomainRow[]> {
  return ex.select().from(domains).where(eq(domains.projectId, projectId)).orderBy(desc(domains.isPrimary), asc(domains.createdAt), asc(domains.id));
}

/**
 * Removes `hostname` (normalized by the caller) from the caller's project: the
 * project's 404 first, then the domain's (a domain of another project is not
 * found here). Removing the primary makes the oldest remaining domain primary,
 * or none. The project row is locked as connect locks it, so deletes and
 * connects of one project take turns and leave exactly one primary (or none).
 * The edge drops the hostname on the commit's notification.
 */
export async function removeDomain(db: Db, orgId: string, projectId: string, hostname: string): Promise<void> {
  await db.transaction(async (tx) => {
    const project = await findProject(tx, orgId, projectId, "update");
    const [removed] = await tx
      .delete(domains)
      .where(and(eq(domains.projectId, project.id), eq(domains.hostname, hostname)))
      .returning({ isPrimary: domains.isPrimary });
    if (!removed) throw notFound("Domain");
    if (!removed.isPrimary) return;
    const [next] = await tx
      .select({ id: domains.id })
      .from(domains)
      .where(eq(domains.projectId, project.id))
      .orderBy(asc(domains.createdAt), asc(domains.id))
      .limit(1);
    if (next) await tx.update(domains).set({ isPrimary: true }).where(eq(domains.id, next.id));
  });
}
