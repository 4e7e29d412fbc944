/**
 * The cloud link and the cloud projects this instance knows of. The link's token
 * is stored encrypted, bound to its organization's row.
 */
import { and, asc, eq, inArray, isNull, sql } from "drizzle-orm";
import type { SecretContext } from "../../shared/crypto/keyring";
import { cloudLinks, cloudProjects, organizations, projects } from "../../shared/db/schema";
import { rowsOf } from "../../shared/db/rows";
import type { Db, Executor } from "../../shared/db/types";

export type LinkRow = typeof cloudLinks.$inferSelect;

export const linkTokenContext = (orgId: string): SecretContext => ({ orgId, table: "cloud_links", column: "token", rowId: orgId });

export async function findLink(db: Executor, orgId: string): Promise<LinkRow | undefined> {
  const [row] = await db.select().from(cloudLinks).where(eq(cloudLinks.orgId, orgId));
  return row;
}

export async function saveLink(db: Executor, row: Omit<LinkRow, "createdAt" | "updatedAt">, now: Date): Promise<LinkRow> {
  const { orgId, ...fields } = row;
  const [saved] = await db
    .insert(cloudLinks)
    .values({ ...row, createdAt: now, updatedAt: now })
    .onConflictDoUpdate({ target: cloudLinks.orgId, set: { ...fields, updatedAt: now } })
    .returning();
  return saved!;
}

export async function deleteLink(db: Executor, orgId: string): Promise<boolean> {
  const rows = await db.delete(cloudLinks).where(eq(cloudLinks.orgId, orgId)).returning({ orgId: cloudLinks.orgId });
  return rows.length > 0;
}

/** The organization CLOUD_TOKEN links: the instance's first (the one created at first start). */
export async function firstOrganization(db: Db): Promise<string | undefined> {
  const [row] = await db.select({ id: organizations.id }).from(organizations).orderBy(asc(organizations.id)).limit(1);
  return row?.id;
}

/**
 * Where a per-project call with `id` goes: the cloud project's id when `id` is a
 * known cloud project of the organization (not brought back) or a local project
 * transferred to the cloud; undefined when the project is (or is not) local.
 */
export async function cloudTargetOf(db: Executor, orgId: string, id: string): Promise<string | undefined> {
  const rows = await db.execute(sql`
    SELECT ${cloudProjects.id} AS target FROM ${cloudProjects}
      WHERE ${cloudProjects.id} = ${id} AND ${cloudProjects.orgId} = ${orgId} AND ${cloudProjects.returnedAt} IS NULL
        -- A local project's id is never the cloud's to answer for (a cloud listing an id that exists here is ignored).
        AND NOT EXISTS (SELECT 1 FROM ${projects} WHERE ${projects.id} = ${id})
    UNION ALL
    SELECT ${projects.movedToCloud} AS target FROM ${projects}
      WHERE ${projects.id} = ${id} AND ${projects.orgId} = ${orgId} AND ${projects.movedToCloud} IS NOT NULL
    LIMIT 1`);
  return rowsOf<{ target: string }>(rows)[0]?.target;
}

/** Records cloud projects seen in the home feed (their ids become recognisable); a project brought back stays brought back. Returns the ids recorded. */
export async function rememberCloudProjects(db: Executor, orgId: string, listed: Array<{ id: string; name: string }>, now: Date): Promise<Set<string>> {
  if (listed.length === 0) return new Set();
  // An id that names a project of this instance is not recorded: the cloud cannot claim a local project's routes.
  const local = new Set(
    (
      await db
        .select({ id: projects.id })
        .from(projects)
        .where(
          inArray(
            projects.id,
            listed.map((p) => p.id),
          ),
        )
    ).map((r) => r.id),
  );
  const seen = listed.filter((p) => !local.has(p.id));
  if (seen.length === 0) return new Set();
  await db
    .insert(cloudProjects)
    .values(seen.map((p) => ({ id: p.id, orgId, name: p.name, seenAt: now })))
    .onConflictDoUpdate({ target: [cloudProjects.orgId, cloudProjects.id], set: { name: sql`excluded.name`, seenAt: now } });
  return new Set(seen.map((p) => p.id));
}

/** Ids of the organization's cloud projects brought back to this instance (hidden from the cloud half of the home feed). */
export async function returnedCloudIds(db: Executor, orgId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .select({ id: cloudProjects.id })
    .from(cloudProjects)
    .where(and(eq(cloudProjects.orgId, orgId), inArray(cloudProjects.id, ids), sql`${cloudProjects.returnedAt} IS NOT NULL`));
  return new Set(rows.map((r) => r.id));
}

/**
 * The cloud answered 404 for a project it had: forget the stub, and a local
 * project that had moved there comes back here (disabled, as it was left).
 */
export async function forgetCloudProject(db: Db, orgId: string, cloudId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.delete(cloudProjects).where(and(eq(cloudProjects.id, cloudId), eq(cloudProjects.orgId, orgId), isNull(cloudProjects.returnedAt)));
    await tx
      .update(projects)
      .set({ movedToCloud: null })
      .where(and(eq(projects.orgId, orgId), eq(projects.movedToCloud, cloudId)));
  });
}
