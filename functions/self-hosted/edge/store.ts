/**
 * What the edge needs from the database: every hostname a project answers on,
 * with where its environment's current deployment listens and the project's
 * route rules. Loaded whole at start and again per project when the
 * `workspace_edge` channel names it (migrations/0011_edge_notify.sql).
 */
import { and, eq, inArray, isNotNull, like, lt } from "drizzle-orm";
import {
  deployments,
  domains,
  environments,
  projects,
  rateLimits,
  type RouteRuleConfig,
  type RouteRuleKind,
  routeRules,
  type SLEEP_MODES,
} from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";

export interface EdgeRule {
  id: string;
  kind: RouteRuleKind;
  path: string | null;
  config: RouteRuleConfig;
}

export interface EdgeTarget {
  projectId: string;
  orgId: string;
  environmentId: string;
  environment: string;
  disabled: boolean;
  sleepMode: (typeof SLEEP_MODES)[number];
  /**
   * The environment's current deployment; `port` null while it is not listening
   * yet (a promote being started, an app asleep): the edge holds requests until
   * it is. A crashed one (the runner gave up restarting it) stays here so the
   * edge answers 502 (the app is failing), not 404 (nothing deployed).
   */
  deployment: { id: string; port: number | null; servedBy: string | null; asleep: boolean; crashed: boolean } | null;
  /** Enabled rules, in creation order. */
  rules: EdgeRule[];
}

/** `<slug>--<environment>.<shared domain>`: a preview environment's hostname (one label under the shared domain, so one wildcard certificate covers it). */
export const previewHostname = (slug: string, environment: string, sharedDomain: string) => `${slug}--${environment}.${sharedDomain}`;

/** Hostname → target for the given projects (all when `projectIds` is undefined). A project that no longer exists yields nothing. */
export async function loadTargets(db: Db, sharedDomain: string, projectIds?: string[]): Promise<Map<string, EdgeTarget>> {
  const scope = projectIds ? inArray(projects.id, projectIds) : undefined;
  const projectRows = await db
    .select({ id: projects.id, orgId: projects.orgId, slug: projects.slug, disabledAt: projects.disabledAt, sleepMode: projects.sleepMode })
    .from(projects)
    .where(scope);
  const ids = projectRows.map((p) => p.id);
  const out = new Map<string, EdgeTarget>();
  if (ids.length === 0) return out;
  const [envRows, currentRows, domainRows, ruleRows] = await Promise.all([
    db.select().from(environments).where(inArray(environments.projectId, ids)),
    db
      .select({
        environmentId: deployments.environmentId,
        id: deployments.id,
        port: deployments.port,
        servedBy: deployments.servedBy,
        asleepAt: deployments.asleepAt,
        crashedAt: deployments.crashedAt,
      })
      .from(deployments)
      .where(and(inArray(deployments.projectId, ids), eq(deployments.current, true))),
    db.select({ projectId: domains.projectId, hostname: domains.hostname }).from(domains).where(inArray(domains.projectId, ids)),
    db
      .select()
      .from(routeRules)
      .where(and(inArray(routeRules.projectId, ids), eq(routeRules.enabled, true)))
      .orderBy(routeRules.id),
  ]);
  const current = new Map(currentRows.map((d) => [d.environmentId, d]));
  const rulesOf = new Map<string, EdgeRule[]>();
  for (const r of ruleRows) {
    const list = rulesOf.get(r.projectId) ?? [];
    list.push({ id: r.id, kind: r.kind, path: r.path, config: r.config });
    rulesOf.set(r.projectId, list);
  }
  const project = new Map(projectRows.map((p) => [p.id, p]));
  const production = new Map<string, EdgeTarget>();
  for (const e of envRows) {
    const p = project.get(e.projectId)!;
    const d = current.get(e.id);
    const target: EdgeTarget = {
      projectId: p.id,
      orgId: p.orgId,
      environmentId: e.id,
      environment: e.name,
      disabled: p.disabledAt !== null,
      sleepMode: p.sleepMode,
      deployment: d ? { id: d.id, port: d.port, servedBy: d.servedBy, asleep: d.asleepAt !== null, crashed: d.crashedAt !== null } : null,
      rules: rulesOf.get(p.id) ?? [],
    };
    if (e.kind === "production") {
      production.set(p.id, target);
      out.set(`${p.slug}.${sharedDomain}`, target);
    } else {
      out.set(previewHostname(p.slug, e.name, sharedDomain), target);
    }
  }
  // Connected domains serve production.
  for (const d of domainRows) {
    const target = production.get(d.projectId);
    if (target) out.set(d.hostname.toLowerCase(), target);
  }
  return out;
}

/**
 * Wakes a sleeping deployment: clears `asleep_at` (only if set, so concurrent
 * wakers write once). The change notification reaches every adapter process;
 * the runner serving the deployment starts it.
 */
export async function wakeDeployment(db: Db, id: string): Promise<boolean> {
  const woken = await db
    .update(deployments)
    .set({ asleepAt: null })
    .where(and(eq(deployments.id, id), isNotNull(deployments.asleepAt)))
    .returning({ id: deployments.id });
  return woken.length > 0;
}

/** Records that these deployments just got a request (what idleness is measured from). */
export async function touchDeployments(db: Db, ids: string[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await db.update(deployments).set({ lastRequestAt: at }).where(inArray(deployments.id, ids));
}

/**
 * Deletes the edge's ended rate-limit windows (`edge:<rule>:<client>`), at most
 * `limit` rows. The window is checked again on the row being deleted, so a row
 * that a concurrent request has just moved into a new window is kept (Postgres
 * re-evaluates the outer condition on the updated row): pruning never resets a
 * live count.
 */
export async function pruneEdgeRateLimits(db: Db, now: Date, limit = 5_000): Promise<number> {
  const ended = db
    .select({ key: rateLimits.key })
    .from(rateLimits)
    .where(and(lt(rateLimits.windowEnd, now), like(rateLimits.key, "edge:%")))
    .limit(limit);
  const gone = await db
    .delete(rateLimits)
    .where(and(inArray(rateLimits.key, ended), lt(rateLimits.windowEnd, now)))
    .returning({ key: rateLimits.key });
  return gone.length;
}
