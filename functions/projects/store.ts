/**
 * Project rows and their read form. Every lookup filters by the caller's
 * organization, so a foreign, deleted or never-existing id all answer the same
 * 404 ("Project not found").
 */
import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { deployments, domains, environments, projects, type ProjectOptions } from "../../shared/db/schema";
import type { Executor, Tx } from "../../shared/db/types";
import type { ServiceConfig } from "../../shared/http/context";
import { ApiError, notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { slugCandidates } from "./slug";
import type { ProjectView } from "./schema";

export type ProjectRow = typeof projects.$inferSelect;
type Lock = "update" | "key share";

export const projectNotFound = () => notFound("Project");

/**
 * The caller's project, or the one 404. Inside a transaction, `key share` keeps a
 * concurrent DELETE out until commit (rows that reference the project stay valid),
 * `update` serializes writers of the same project.
 */
export async function findProject(ex: Executor, orgId: string, id: string, lock?: Lock): Promise<ProjectRow> {
  const query = ex
    .select()
    .from(projects)
    .where(and(eq(projects.id, id), eq(projects.orgId, orgId)));
  const [row] = lock ? await query.for(lock) : await query;
  if (!row) throw projectNotFound();
  return row;
}

export const freeHostname = (slug: string, config: ServiceConfig) => `${slug}.${config.sharedDomain}`;

const iso = (d: Date | null) => d?.toISOString() ?? null;

/** The free route as read: a route synced under another shared domain reads `pending` again. */
export function freeRoute(row: ProjectRow, config: ServiceConfig) {
  const hostname = freeHostname(row.slug, config);
  const state = row.routingState === "synced" && row.routingHost !== hostname ? "pending" : row.routingState;
  return { hostname, state, lastAttemptAt: iso(row.routingLastAttemptAt), syncedAt: iso(row.routingSyncedAt) };
}

/** Read forms of several projects with three queries, whatever their number. */
export async function projectViews(ex: Executor, rows: ProjectRow[], config: ServiceConfig): Promise<ProjectView[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const domainRows = await ex
    .select()
    .from(domains)
    .where(inArray(domains.projectId, ids))
    .orderBy(desc(domains.isPrimary), domains.id);
  const latest = await ex
    .selectDistinctOn([deployments.projectId], {
      projectId: deployments.projectId,
      id: deployments.id,
      status: deployments.status,
      createdAt: deployments.createdAt,
    })
    .from(deployments)
    .where(inArray(deployments.projectId, ids))
    .orderBy(deployments.projectId, desc(deployments.id));
  // Live = a production deployment is ready (an older one keeps serving after a failed build).
  const live = await ex
    .selectDistinct({ projectId: deployments.projectId })
    .from(deployments)
    .innerJoin(environments, eq(environments.id, deployments.environmentId))
    .where(and(inArray(deployments.projectId, ids), eq(deployments.status, "ready"), eq(environments.kind, "production")));
  const liveIds = new Set(live.map((l) => l.projectId));
  return rows.map((row) => {
    const last = latest.find((d) => d.projectId === row.id);
    return {
      id: row.id,
      name: row.name,
      slug: row.slug,
      status: row.disabledAt ? "disabled" : liveIds.has(row.id) ? "live" : "created",
      disabledAt: iso(row.disabledAt),
      framework: row.framework,
      buildCommand: row.options.buildCommand ?? null,
      gitProvider: row.gitProvider,
      gitOwner: row.gitOwner,
      gitRepo: row.gitRepo,
      gitBranch: row.gitBranch,
      routes: {
        free: freeRoute(row, config),
        domains: domainRows
          .filter((d) => d.projectId === row.id)
          .map((d) => ({ hostname: d.hostname, primary: d.isPrimary, createdAt: d.createdAt.toISOString() })),
      },
      latestDeployment: last ? { id: last.id, status: last.status, createdAt: last.createdAt.toISOString() } : null,
      location: config.mode,
      createdAt: row.createdAt.toISOString(),
      updatedAt: row.updatedAt.toISOString(),
    };
  });
}

export async function projectView(ex: Executor, row: ProjectRow, config: ServiceConfig): Promise<ProjectView> {
  return (await projectViews(ex, [row], config))[0]!;
}

/** The environment of a project by name; `no key update` serializes writers of its variables. */
export async function findEnvironment(ex: Executor, projectId: string, name: string, lock?: "no key update") {
  const query = ex
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, projectId), eq(environments.name, name)));
  const [env] = lock ? await query.for(lock) : await query;
  return env;
}

/** `options || patch - cleared`: one statement, so concurrent writers of different options lose nothing. */
export function mergeOptions(set: Record<string, string>, cleared: string[]) {
  const merged = sql`${projects.options} || ${JSON.stringify(set)}::jsonb`;
  if (cleared.length === 0) return merged;
  return sql`(${merged}) - array[${sql.join(
    cleared.map((k) => sql`${k}`),
    sql`, `,
  )}]::text[]`;
}

export interface NewProject {
  name: string;
  framework?: string | null;
  gitOwner?: string | null;
  gitRepo?: string | null;
  gitBranch?: string | null;
}

/**
 * Records a project and its production environment (POST /api/projects and
 * ensure). The slug is unique across the deployment: the base, then random suffixes.
 */
export async function createProject(
  tx: Tx,
  orgId: string,
  fields: NewProject,
  gitProvider: ProjectRow["gitProvider"],
  options: ProjectOptions,
): Promise<ProjectRow> {
  for (const slug of slugCandidates(fields.name)) {
    const [row] = await tx
      .insert(projects)
      .values({
        id: newId("prj"),
        orgId,
        name: fields.name,
        slug,
        framework: fields.framework ?? "auto",
        gitProvider,
        gitOwner: fields.gitOwner ?? null,
        gitRepo: fields.gitRepo ?? null,
        gitBranch: fields.gitBranch ?? null,
        options,
      })
      .onConflictDoNothing({ target: projects.slug })
      .returning();
    if (!row) continue;
    await tx.insert(environments).values({ id: newId("env"), orgId, projectId: row.id, name: "production", kind: "production" });
    return row;
  }
  throw new ApiError("conflict", "Could not allocate a free-route slug for this name; retry or choose another name");
}
