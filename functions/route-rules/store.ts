/**
 * Route rules' SQL. Creating one locks the project row, so two concurrent
 * creates cannot both pass the per-project cap; an update locks the rule.
 */
import { and, asc, count, eq } from "drizzle-orm";
import { type RouteRuleConfig, type RouteRuleKind, routeRules } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { ApiError, notFound } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { findProject } from "../projects/store";
import { MAX_RULES_PER_PROJECT } from "./schema";

export type RouteRuleRow = typeof routeRules.$inferSelect;

const ruleNotFound = () => notFound("Route rule");

export interface RuleValues {
  kind: RouteRuleKind;
  path: string | null;
  enabled: boolean;
  config: RouteRuleConfig;
}

/** The project's rules in evaluation order within a kind (creation order). */
export async function listRules(ex: Executor, orgId: string, projectId: string): Promise<RouteRuleRow[]> {
  return ex
    .select()
    .from(routeRules)
    .where(and(eq(routeRules.orgId, orgId), eq(routeRules.projectId, projectId)))
    .orderBy(asc(routeRules.id));
}

export async function insertRule(db: Db, orgId: string, projectId: string, values: RuleValues, now: Date): Promise<RouteRuleRow> {
  return db.transaction(async (tx) => {
    await findProject(tx, orgId, projectId, "update");
    const [{ n }] = (await tx.select({ n: count() }).from(routeRules).where(eq(routeRules.projectId, projectId))) as [{ n: number }];
    if (n >= MAX_RULES_PER_PROJECT) {
      throw new ApiError("conflict", `The project already has ${MAX_RULES_PER_PROJECT} route rules, the most it may have: delete one first`);
    }
    const [row] = await tx
      .insert(routeRules)
      .values({ id: newId("rr"), orgId, projectId, ...values, createdAt: now, updatedAt: now })
      .returning();
    return row!;
  });
}

/** The rule of the caller's project, or the one 404 (another project's rule included). */
export async function findRule(ex: Executor, orgId: string, projectId: string, ruleId: string, lock?: "update"): Promise<RouteRuleRow> {
  const query = ex
    .select()
    .from(routeRules)
    .where(and(eq(routeRules.id, ruleId), eq(routeRules.orgId, orgId), eq(routeRules.projectId, projectId)));
  const [row] = lock ? await query.for(lock) : await query;
  if (!row) throw ruleNotFound();
  return row;
}

/** Re-reads the rule under a lock and writes what `change` derives from it. */
export async function updateRule(
  db: Db,
  orgId: string,
  projectId: string,
  ruleId: string,
  change: (row: RouteRuleRow) => Pick<RuleValues, "path" | "enabled" | "config">,
  now: Date,
): Promise<RouteRuleRow> {
  return db.transaction(async (tx) => {
    const current = await findRule(tx, orgId, projectId, ruleId, "update");
    const [row] = await tx
      .update(routeRules)
      .set({ ...change(current), updatedAt: now })
      .where(eq(routeRules.id, ruleId))
      .returning();
    return row!;
  });
}

export async function deleteRule(db: Db, orgId: string, projectId: string, ruleId: string): Promise<void> {
  const deleted = await db
    .delete(routeRules)
    .where(and(eq(routeRules.id, ruleId), eq(routeRules.orgId, orgId), eq(routeRules.projectId, projectId)))
    .returning({ id: routeRules.id });
  if (deleted.length === 0) throw ruleNotFound();
}
