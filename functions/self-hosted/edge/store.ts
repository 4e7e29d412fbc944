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
  servers,
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
   *
   * `remote`: it runs on a build server (placement `server`); `serverId` is that
   * server (the one that reported serving it, else the one holding or required by
   * its job; null while none is known). The edge forwards its requests there,
   * signed, instead of to a local port, and `port` (the app's port on that
   * server) only says whether it listens.
   */
  deployment: {
    id: string;
    port: number | null;
    servedBy: string | null;
    asleep: boolean;
    crashed: boolean;
    remote: boolean;
    serverId: string | null;
  } | null;
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
        placement: deployments.placement,
        claimedBy: deployments.claimedBy,
        serverId: deployments.serverId,
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
      deployment: d
        ? {
            id: d.id,
            port: d.port,
            servedBy: d.servedBy,
            asleep: d.asleepAt !== null,
            crashed: d.crashedAt !== null,
            remote: d.placement === "server",
            serverId: d.placement === "server" ? (d.servedBy ?? d.claimedBy ?? d.serverId) : null,
          }
        : null,
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
 * The target of one hostname, read from the database (the Worker's edge, which keeps no
 * route table): under the shared domain, the project whose slug is the label (production)
 * or a prefix of it before `--` (a preview); else a connected domain. Undefined: no app.
 */
export async function loadTargetOfHost(db: Db, sharedDomain: string, hostname: string): Promise<EdgeTarget | undefined> {
  const suffix = `.${sharedDomain}`;
  let ids: string[];
  if (hostname.endsWith(suffix)) {
    const label = hostname.slice(0, -suffix.length);
    if (label.includes(".")) return undefined;
    // `a--b--c` may be slug `a--b` with environment `c`, or slug `a` with environment `b--c`: every split is a candidate.
    const slugs = [label];
    for (let i = label.indexOf("--"); i > 0; i = label.indexOf("--", i + 1)) slugs.push(label.slice(0, i));
    const rows = await db.select({ id: projects.id }).from(projects).where(inArray(projects.slug, slugs));
    ids = rows.map((r) => r.id);
  } else {
    const rows = await db.select({ projectId: domains.projectId }).from(domains).where(eq(domains.hostname, hostname));
    ids = rows.map((r) => r.projectId);
  }
  if (ids.length === 0) return undefined;
  return (await loadTargets(db, sharedDomain, ids)).get(hostname);
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

/** Where a build server's edge is reached, and its edge key as stored (encrypted); undefined when the server is gone. */
export async function forwardingServer(
  db: Db,
  id: string,
): Promise<{ id: string; orgId: string; publicUrl: string | null; edgeKeyCiphertext: string | null } | undefined> {
  const [row] = await db
    .select({ id: servers.id, orgId: servers.orgId, publicUrl: servers.publicUrl, edgeKeyCiphertext: servers.edgeKeyCiphertext })
    .from(servers)
    .where(eq(servers.id, id));
  return row;
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
