/**
 * needsRedeploy: whether an environment's current deployment runs an older
 * configuration than the live one (config-snapshot.ts pins it when queued), and
 * which parts differ. Nothing is decrypted: resources and options are compared as
 * stored, the variables through a digest the database computes over the stored
 * rows, the same SQL when the snapshot is taken and when it is compared. A secret
 * enters the digest as its ciphertext, whose random IV makes it a per-write token:
 * the digest tells nothing about a secret's value (equal values do not digest
 * alike), and a secret saved again with the same value keeps its ciphertext
 * (env-store.ts), so re-saving the form changes nothing.
 */
import { and, eq, getTableName, inArray, type SQL, sql } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import { type ConfigSnapshot, deployments, envVars, type projects } from "../../shared/db/schema";
import type { Executor } from "../../shared/db/types";

/** What can differ between the live configuration and a deployment's snapshot, in this order. */
export const CONFIG_PARTS = ["variables", "resources", "options"] as const;
export type ConfigPart = (typeof CONFIG_PARTS)[number];

/** The project columns a deployment pins (resources and options). */
export type ProjectConfigRow = Pick<
  typeof projects.$inferSelect,
  "productionCpuCores" | "productionMemoryMb" | "buildCpuCores" | "buildMemoryMb" | "diskGb" | "port" | "options"
>;

/**
 * The variables' digest of the environment the outer query's row names (its
 * project and environment columns), as a scalar subquery over the rows as stored
 * (key, kind, value or ciphertext; found through env_vars' primary key), keys in
 * byte order so the database's collation never changes it. The columns are written
 * with their table's name: drizzle leaves it out in a one-table select, and
 * env_vars has columns of the same names.
 */
export function variablesDigest(outer: { projectId: AnyPgColumn; environmentId: AnyPgColumn }): SQL<string> {
  const ref = (c: AnyPgColumn) => sql`${sql.identifier(getTableName(c.table))}.${sql.identifier(c.name)}`;
  return sql<string>`(
  select encode(sha256(convert_to(coalesce(string_agg(json_build_array(v.key, v.is_secret, coalesce(v.value, v.value_ciphertext))::text, E'\\n' order by v.key collate "C"), ''), 'UTF8')), 'hex')
  from ${envVars} v where v.project_id = ${ref(outer.projectId)} and v.environment_id = ${ref(outer.environmentId)})`;
}

/** The resources a deployment pins: what confines its build and its app. Sleep mode is not among them: it applies at once to whatever runs. */
export const resourcesOf = (p: ProjectConfigRow): ConfigSnapshot["resources"] => ({
  productionCpuCores: p.productionCpuCores,
  productionMemoryMb: p.productionMemoryMb,
  buildCpuCores: p.buildCpuCores,
  buildMemoryMb: p.buildMemoryMb,
  diskGb: p.diskGb,
  port: p.port,
});

/** JSON with object keys sorted: equal configurations give equal text whatever key order jsonb kept. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function changesOf(snapshot: ConfigSnapshot, project: ProjectConfigRow, liveDigest: string): ConfigPart[] {
  const differs: Record<ConfigPart, boolean> = {
    variables: snapshot.variablesDigest !== liveDigest,
    resources: canonical(snapshot.resources) !== canonical(resourcesOf(project)),
    options: canonical(snapshot.options) !== canonical(project.options),
  };
  return CONFIG_PARTS.filter((part) => differs[part]);
}

/** Whether what runs is older than the live configuration, and which parts differ. */
export interface RedeployState {
  needsRedeploy: boolean;
  changes: ConfigPart[];
}

export const UP_TO_DATE: RedeployState = { needsRedeploy: false, changes: [] };

/**
 * The state of every environment of `rows` that has a current deployment, by
 * environment id, in one query whatever their number. An environment without a
 * current deployment (nothing runs), or whose current deployment was queued before
 * snapshots (it runs the live configuration), is absent: UP_TO_DATE.
 */
export async function redeployStates(
  ex: Executor,
  rows: Array<ProjectConfigRow & { id: string }>,
): Promise<Map<string, RedeployState & { projectId: string }>> {
  const out = new Map<string, RedeployState & { projectId: string }>();
  if (rows.length === 0) return out;
  const current = await ex
    .select({
      environmentId: deployments.environmentId,
      projectId: deployments.projectId,
      snapshot: deployments.configSnapshot,
      liveDigest: variablesDigest(deployments),
    })
    .from(deployments)
    .where(
      and(
        inArray(
          deployments.projectId,
          rows.map((r) => r.id),
        ),
        eq(deployments.current, true),
      ),
    );
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const c of current) {
    const project = byId.get(c.projectId);
    if (!c.snapshot || !project) continue;
    const changes = changesOf(c.snapshot, project, c.liveDigest);
    out.set(c.environmentId, { projectId: c.projectId, needsRedeploy: changes.length > 0, changes });
  }
  return out;
}

/** A project's state: any of its environments', with every part that differs in one of them. */
export function projectRedeployState(states: Map<string, RedeployState & { projectId: string }>, projectId: string): RedeployState {
  const changed = new Set<ConfigPart>();
  for (const s of states.values()) if (s.projectId === projectId) for (const part of s.changes) changed.add(part);
  const changes = CONFIG_PARTS.filter((p) => changed.has(p));
  return { needsRedeploy: changes.length > 0, changes };
}
