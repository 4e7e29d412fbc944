/**
 * Project rows and their read form. Every lookup filters by the caller's
 * organization, so a foreign, deleted or never-existing id all answer the same
 * 404 ("Project not found").
 */
import { and, asc, desc, eq, gt, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import { deployments, domains, environments, projects, type ProjectOptions } from "../../shared/db/schema";
import type { Db, Executor, Tx } from "../../shared/db/types";
import type { ServiceConfig } from "../../shared/http/context";
import { ApiError, notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { projectRedeployState, redeployStates } from "../deployments/config-drift";
import { slugCandidates } from "./slug";
import { projectStates } from "./status";
import type { z } from "@hono/zod-openapi";
import type { GitProvider } from "../../shared/git/hosts";
import type { ProjectSourceSchema, ProjectView, SOURCE_KINDS } from "./schema";

export type ProjectRow = typeof projects.$inferSelect;
/** Columns to write: values, or SQL computed from the row (e.g. `mergeOptions`). */
export type ProjectSet = PgUpdateSetSource<typeof projects>;
type Lock = "update" | "key share";

const projectNotFound = () => notFound("Project");

/**
 * The caller's project, or the one 404. Inside a transaction, `key share` keeps a
 * concurrent DELETE out until commit (rows that reference the project stay valid),
 * `update` serializes writers of the same project.
 */
export async function findProject(ex: Executor, orgId: string, id: string, lock?: Lock): Promise<ProjectRow> {
  const query = ex
    .select()
    .from(projects)
    // A project transferred to the cloud is a stub here: its per-project routes are forwarded (guard.ts), and nothing local finds it.
    .where(and(eq(projects.id, id), eq(projects.orgId, orgId), isNull(projects.movedToCloud)));
  const [row] = lock ? await query.for(lock) : await query;
  if (!row) throw projectNotFound();
  return row;
}

/** One page of the organization's projects, oldest first (by id); one row more than `limit` tells there is a next page. */
export async function listProjects(ex: Executor, orgId: string, limit: number, cursor?: string): Promise<ProjectRow[]> {
  return ex
    .select()
    .from(projects)
    .where(and(eq(projects.orgId, orgId), isNull(projects.movedToCloud), cursor ? gt(projects.id, cursor) : undefined))
    .orderBy(asc(projects.id))
    .limit(limit + 1);
}

/**
 * One UPDATE of the caller's project, returning the row as written: a single
 * statement, so concurrent writers of other columns lose nothing. No such project
 * is the one 404. With `ifDisabled`, only a project in that state is written, and
 * any other outcome (the other state, or no project) is `undefined`.
 */
export async function updateProject(ex: Executor, orgId: string, id: string, set: ProjectSet): Promise<ProjectRow>;
export async function updateProject(ex: Executor, orgId: string, id: string, set: ProjectSet, only: { ifDisabled: boolean }): Promise<ProjectRow | undefined>;
export async function updateProject(ex: Executor, orgId: string, id: string, set: ProjectSet, only?: { ifDisabled: boolean }): Promise<ProjectRow | undefined> {
  const state = only === undefined ? undefined : only.ifDisabled ? isNotNull(projects.disabledAt) : isNull(projects.disabledAt);
  const [row] = await ex
    .update(projects)
    .set(set)
    .where(and(eq(projects.id, id), eq(projects.orgId, orgId), state))
    .returning();
  if (!row && !only) throw projectNotFound();
  return row;
}

/** Writes the given columns and `updatedAt`; with nothing to write, the project as it is. */
export async function patchProject(ex: Executor, orgId: string, id: string, set: ProjectSet, now: Date): Promise<ProjectRow> {
  if (Object.keys(set).length === 0) return findProject(ex, orgId, id);
  return updateProject(ex, orgId, id, { ...set, updatedAt: now });
}

export const freeHostname = (slug: string, config: ServiceConfig) => `${slug}.${config.sharedDomain}`;

const iso = (d: Date | null) => d?.toISOString() ?? null;

/** The free route as read: a route synced under another shared domain reads `pending` again. */
export function freeRoute(row: ProjectRow, config: ServiceConfig) {
  const hostname = freeHostname(row.slug, config);
  const state = row.routingState === "synced" && row.routingHost !== hostname ? "pending" : row.routingState;
  return { hostname, state, lastAttemptAt: iso(row.routingLastAttemptAt), syncedAt: iso(row.routingSyncedAt) };
}

/** The project names a repository on a git host (linked through git/link, or named by PATCH). */
export function hasRepository(row: ProjectRow): boolean {
  return !!row.gitProvider && row.gitProvider !== "upload" && !!row.gitOwner && !!row.gitRepo;
}

/** Where deployments take the source from: a named repository wins, then an upload project, then a local folder. */
export function sourceKind(row: ProjectRow): (typeof SOURCE_KINDS)[number] {
  if (hasRepository(row)) return "git";
  if (row.gitProvider === "upload") return "upload";
  if (row.localPath !== null) return "local";
  return "none";
}

/** The project's source as GET /api/projects/:id and /info answer it: only the fields of its kind are set. */
export function sourceView(row: ProjectRow): z.infer<typeof ProjectSourceSchema> {
  const kind = sourceKind(row);
  return {
    kind,
    repository:
      kind === "git"
        ? { provider: row.gitProvider as GitProvider, owner: row.gitOwner!, repo: row.gitRepo!, branch: row.gitBranch ?? row.gitDefaultBranch }
        : null,
    localPath: kind === "local" ? row.localPath : null,
  };
}

export function lastPush(row: ProjectRow) {
  return row.lastPushCommit && row.lastPushAt ? { commit: row.lastPushCommit, branch: row.lastPushBranch, at: row.lastPushAt.toISOString() } : null;
}

/** Read forms of several projects with a fixed number of queries, whatever their number. */
export async function projectViews(ex: Executor, rows: ProjectRow[], config: ServiceConfig): Promise<ProjectView[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const domainRows = await ex.select().from(domains).where(inArray(domains.projectId, ids)).orderBy(desc(domains.isPrimary), domains.id);
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
  const states = await projectStates(ex, rows);
  const redeploy = await redeployStates(ex, rows);
  return rows.map((row) => {
    const last = latest.find((d) => d.projectId === row.id);
    return {
      id: row.id,
      name: row.name,
      slug: row.slug,
      ...states.get(row.id)!,
      disabledAt: iso(row.disabledAt),
      framework: row.framework,
      buildCommand: row.options.buildCommand ?? null,
      gitProvider: row.gitProvider,
      gitOwner: row.gitOwner,
      gitRepo: row.gitRepo,
      gitBranch: row.gitBranch,
      git: {
        linked: hasRepository(row),
        branch: row.gitBranch ?? row.gitDefaultBranch,
        defaultBranch: row.gitDefaultBranch,
        linkedAt: iso(row.gitLinkedAt),
        autoDeploy: row.autoDeploy,
        lastPush: lastPush(row),
      },
      source: sourceView(row),
      routes: {
        free: freeRoute(row, config),
        domains: domainRows
          .filter((d) => d.projectId === row.id)
          .map((d) => ({ hostname: d.hostname, primary: d.isPrimary, createdAt: d.createdAt.toISOString() })),
      },
      latestDeployment: last ? { id: last.id, status: last.status, createdAt: last.createdAt.toISOString() } : null,
      ...projectRedeployState(redeploy, row.id),
      location: config.mode,
      createdAt: row.createdAt.toISOString(),
      updatedAt: row.updatedAt.toISOString(),
    };
  });
}

export async function projectView(ex: Executor, row: ProjectRow, config: ServiceConfig): Promise<ProjectView> {
  return (await projectViews(ex, [row], config))[0]!;
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

interface NewProject {
  name: string;
  framework?: string | null;
  gitOwner?: string | null;
  gitRepo?: string | null;
  gitBranch?: string | null;
}

/** Records a project and its production environment in one transaction (POST /api/projects). */
export async function createProject(
  db: Db,
  orgId: string,
  fields: NewProject,
  gitProvider: ProjectRow["gitProvider"],
  options: ProjectOptions,
  reservedSlugs: readonly string[] = [],
): Promise<ProjectRow> {
  return db.transaction((tx) => insertProject(tx, orgId, fields, gitProvider, options, reservedSlugs));
}

/**
 * Records a project and its production environment inside the caller's
 * transaction (create and ensure). The slug is unique across the deployment: the
 * base, then random suffixes (`reservedSlugs`: the instance's own, see configReservedSlugs).
 */
export async function insertProject(
  tx: Tx,
  orgId: string,
  fields: NewProject,
  gitProvider: ProjectRow["gitProvider"],
  options: ProjectOptions,
  reservedSlugs: readonly string[] = [],
): Promise<ProjectRow> {
  for (const slug of slugCandidates(fields.name, reservedSlugs)) {
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
