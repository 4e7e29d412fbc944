/** Environment rows of a project: `production` from creation, previews added by name. */
import { and, asc, eq, gt } from "drizzle-orm";
import { environments } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { findProject } from "./store";

export type EnvironmentRow = typeof environments.$inferSelect;

/** The environment of a project by name; `no key update` serializes writers of its variables. */
export async function findEnvironment(ex: Executor, projectId: string, name: string, lock?: "no key update"): Promise<EnvironmentRow | undefined> {
  const query = ex
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, projectId), eq(environments.name, name)));
  const [env] = lock ? await query.for(lock) : await query;
  return env;
}

/** One page in creation order (so production first); one row more than `limit` tells there is a next page. */
export async function listEnvironments(ex: Executor, projectId: string, limit: number, cursor?: string): Promise<EnvironmentRow[]> {
  return ex
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, projectId), cursor ? gt(environments.id, cursor) : undefined))
    .orderBy(asc(environments.id))
    .limit(limit + 1);
}

/**
 * Adds a preview environment to the caller's project (404 when it is not theirs);
 * `undefined` when the name is taken. KEY SHARE keeps a concurrent DELETE of the
 * project out until commit.
 */
export async function createPreviewEnvironment(
  db: Db,
  orgId: string,
  projectId: string,
  name: string,
  branch: string,
  autoRollback?: boolean,
): Promise<EnvironmentRow | undefined> {
  return db.transaction(async (tx) => {
    const project = await findProject(tx, orgId, projectId, "key share");
    const [row] = await tx
      .insert(environments)
      .values({ id: newId("env"), orgId, projectId: project.id, name, kind: "preview", branch, autoRollback })
      .onConflictDoNothing()
      .returning();
    return row;
  });
}

/** Whether the environment rolls back on its own after its current app is given up: as set, else on for production only. */
export const autoRollbackOf = (e: Pick<EnvironmentRow, "kind" | "autoRollback">): boolean => e.autoRollback ?? e.kind === "production";

/** Sets the environment's autoRollback (the caller's project, else 404); undefined when it has no such environment. */
export async function setAutoRollback(db: Db, orgId: string, projectId: string, name: string, autoRollback: boolean): Promise<EnvironmentRow | undefined> {
  const project = await findProject(db, orgId, projectId);
  const [row] = await db
    .update(environments)
    .set({ autoRollback })
    .where(and(eq(environments.projectId, project.id), eq(environments.name, name)))
    .returning();
  return row;
}
