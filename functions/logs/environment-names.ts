/**
 * The environment each log line comes from. Lines store only their deployment;
 * a deployment never changes environment and environments are never renamed, so
 * a name once read stays true. One lookup per page or stream batch, for the
 * deployments it names that are not known yet: a stream reads each deployment's
 * environment once, never once per line, and the line queries keep their plans.
 */
import { and, eq, inArray } from "drizzle-orm";
import { deployments, environments } from "../../shared/db/schema";
import type { Executor } from "../../shared/db/types";
import { type LogLine, logLineView } from "./schema";
import type { LogLineRow } from "./store";

/** Deployments a namer remembers; past it, it forgets them all (a stream over a project with that many deployments). */
const MAX_REMEMBERED = 1000;

/** Turns rows into wire lines with their environment's name; keep one per stream so later batches reuse what earlier ones read. */
export type LineNamer = (rows: LogLineRow[]) => Promise<LogLine[]>;

export function lineNamer(ex: Executor, orgId: string): LineNamer {
  const known = new Map<string, string | null>();
  return async (rows) => {
    const unknown = [...new Set(rows.map((r) => r.deploymentId).filter((id): id is string => id !== null && !known.has(id)))];
    if (unknown.length > 0) {
      if (known.size + unknown.length > MAX_REMEMBERED) known.clear();
      const found = await ex
        .select({ id: deployments.id, name: environments.name })
        .from(deployments)
        .innerJoin(environments, eq(environments.id, deployments.environmentId))
        .where(and(inArray(deployments.id, unknown), eq(deployments.orgId, orgId)));
      for (const id of unknown) known.set(id, null);
      for (const { id, name } of found) known.set(id, name);
    }
    return rows.map((r) => logLineView(r, r.deploymentId === null ? null : (known.get(r.deploymentId) ?? null)));
  };
}
