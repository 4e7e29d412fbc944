/**
 * Deployment rows of a project (written by the deployments API; read here) and the
 * deployment-session tokens issued for one project's deployments.
 */
import { and, desc, eq, lt } from "drizzle-orm";
import { apiTokens, deployments, environments } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { findProject } from "./store";

export type DeploymentRow = typeof deployments.$inferSelect;

/** One page, newest first (by id), with each one's environment name; one row more than `limit` tells there is a next page. */
export async function listDeployments(
  ex: Executor,
  projectId: string,
  filter: { environmentId?: string; status?: DeploymentRow["status"] },
  limit: number,
  cursor?: string,
) {
  return ex
    .select({ d: deployments, environment: environments.name })
    .from(deployments)
    .innerJoin(environments, eq(environments.id, deployments.environmentId))
    .where(
      and(
        eq(deployments.projectId, projectId),
        filter.environmentId ? eq(deployments.environmentId, filter.environmentId) : undefined,
        filter.status ? eq(deployments.status, filter.status) : undefined,
        cursor !== undefined ? lt(deployments.id, cursor) : undefined,
      ),
    )
    .orderBy(desc(deployments.id))
    .limit(limit + 1);
}

/** The project's newest deployment, whatever its state. */
export async function lastDeployment(ex: Executor, projectId: string): Promise<DeploymentRow | undefined> {
  const [last] = await ex.select().from(deployments).where(eq(deployments.projectId, projectId)).orderBy(desc(deployments.id)).limit(1);
  return last;
}

/**
 * The production deployment that serves: the current one; a ready row nobody made
 * current (written straight into the table, as tests do) counts when none is.
 */
export async function servingDeployment(ex: Executor, projectId: string): Promise<DeploymentRow | undefined> {
  const [serving] = await ex
    .select({ d: deployments })
    .from(deployments)
    .innerJoin(environments, eq(environments.id, deployments.environmentId))
    .where(and(eq(deployments.projectId, projectId), eq(deployments.status, "ready"), eq(environments.kind, "production")))
    .orderBy(desc(deployments.current), desc(deployments.id))
    .limit(1);
  return serving?.d;
}

interface NewSession {
  orgId: string;
  userId: string;
  tokenHash: string;
  displayPrefix: string;
  scopes: string[];
  expiresAt: Date;
  /** The caller's token or cookie session (Caller.tokenId): streams opened with this token end with it. */
  parentId: string;
}

/**
 * Records a deployment-session token for the caller's project (404 when it is not
 * theirs) and returns the project's id. KEY SHARE keeps a concurrent DELETE of the
 * project, which removes its sessions, out until commit.
 */
export async function createDeploymentSession(db: Db, projectId: string, s: NewSession): Promise<string> {
  return db.transaction(async (tx) => {
    const project = await findProject(tx, s.orgId, projectId, "key share");
    await tx.insert(apiTokens).values({
      id: newId("tok"),
      userId: s.userId,
      name: `deployment session ${project.id}`,
      tokenHash: s.tokenHash,
      displayPrefix: s.displayPrefix,
      scopes: s.scopes,
      expiresAt: s.expiresAt,
      kind: "deployment_session",
      projectId: project.id,
      orgId: s.orgId,
      parentId: s.parentId,
    });
    return project.id;
  });
}
