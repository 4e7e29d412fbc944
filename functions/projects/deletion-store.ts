/**
 * What deleting a project removes, counted per kind, and the removal itself: one
 * transaction under the project's row lock, so the counts answered are what went.
 */
import { and, count, eq, isNotNull, like, ne } from "drizzle-orm";
import { apiTokens, deployments, domains, environments, envVars, projects, projectServices } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { findProject, type ProjectRow } from "./store";

async function countOf(
  ex: Executor,
  table: typeof environments | typeof envVars | typeof domains | typeof deployments | typeof projectServices,
  projectId: string,
) {
  const [row] = await ex.select({ n: count() }).from(table).where(eq(table.projectId, projectId));
  return row!.n;
}

export async function deletionCounts(ex: Executor, project: ProjectRow) {
  const [sessions] = await ex
    .select({ n: count() })
    .from(apiTokens)
    .where(and(eq(apiTokens.projectId, project.id), eq(apiTokens.kind, "deployment_session")));
  return {
    projects: 1 as const,
    environments: await countOf(ex, environments, project.id),
    envVars: await countOf(ex, envVars, project.id),
    domains: await countOf(ex, domains, project.id),
    deployments: await countOf(ex, deployments, project.id),
    services: await countOf(ex, projectServices, project.id),
    cloneTokens: project.cloneTokenCiphertext ? 1 : 0,
    deploymentSessions: sessions!.n,
  };
}

/**
 * Deletes the caller's project (404 when it is not theirs) and answers what went,
 * with the upload-store keys of its deployments' artifacts (the caller removes
 * those objects once the rows are gone).
 */
export async function deleteProject(
  db: Db,
  orgId: string,
  id: string,
): Promise<{ removes: Awaited<ReturnType<typeof deletionCounts>>; artifactKeys: string[] }> {
  return db.transaction(async (tx) => {
    // FOR UPDATE waits for writers holding KEY SHARE (env, environments, domains, sessions) and blocks new ones.
    const project = await findProject(tx, orgId, id, "update");
    const removes = await deletionCounts(tx, project);
    const artifacts = await tx
      .select({ key: deployments.artifactKey })
      .from(deployments)
      .where(and(eq(deployments.projectId, project.id), isNotNull(deployments.artifactKey), like(deployments.artifactKey, "artifacts/%")));
    // Project-pinned tokens (deployment sessions, log-stream tokens) go with their project.
    await tx.delete(apiTokens).where(and(eq(apiTokens.projectId, project.id), ne(apiTokens.kind, "personal")));
    // Environments, env vars, domains and deployments go with it (ON DELETE CASCADE).
    await tx.delete(projects).where(eq(projects.id, project.id));
    return { removes, artifactKeys: artifacts.map((a) => a.key!) };
  });
}
