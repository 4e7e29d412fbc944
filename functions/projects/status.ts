/**
 * A project's status as a person reads it: what its production environment's
 * current deployment does now, never `live` while nothing answers.
 *
 * - `disabled`: deploys paused, every route offline.
 * - `created`: no production deployment has gone live (none is current).
 * - `live`: the current deployment's app answers (or sleeps: the next request wakes it).
 * - `degraded`: the current deployment's app does not answer now: it is being
 *   started (a promote, a restart of the server) or restarted after a crash,
 *   or a start is being retried; edges hold its requests meanwhile.
 * - `crashed`: the current deployment's app crashed more often than the
 *   restart policy allows and was stopped (or could not be started at all).
 *
 * `statusReason` says why for `degraded` and `crashed`, else null.
 */
import { and, eq, inArray } from "drizzle-orm";
import { deployments, environments } from "../../shared/db/schema";
import type { Executor } from "../../shared/db/types";

export const PROJECT_STATUSES = ["created", "live", "degraded", "crashed", "disabled"] as const;
export type ProjectStatus = (typeof PROJECT_STATUSES)[number];

export const STATUS_DOC =
  "Project status, from its production environment's current deployment: `created` (no deployment has gone live yet), `live` (the current deployment's app answers, or sleeps until the next request), `degraded` (it does not answer now: starting, restarting after a crash, or a start being retried; `statusReason` says which, edges hold requests meanwhile), `crashed` (it crashed more often than the restart policy allows, or could not be started: deploy again or promote another deployment), `disabled` (deploys paused, every route offline). Disable and enable only toggle `disabled`.";

export interface ProjectState {
  status: ProjectStatus;
  statusReason: string | null;
  /** The production app is stopped for being idle (auto_sleep). */
  asleep: boolean;
}

/** The state of each project (by id) from its production current deployment, in one query. */
export async function projectStates(ex: Executor, rows: Array<{ id: string; disabledAt: Date | null }>): Promise<Map<string, ProjectState>> {
  const ids = rows.map((r) => r.id);
  const current =
    ids.length === 0
      ? []
      : await ex
          .select({
            projectId: deployments.projectId,
            id: deployments.id,
            port: deployments.port,
            crashedAt: deployments.crashedAt,
            asleepAt: deployments.asleepAt,
          })
          .from(deployments)
          .innerJoin(environments, eq(environments.id, deployments.environmentId))
          .where(and(inArray(deployments.projectId, ids), eq(deployments.current, true), eq(environments.kind, "production")));
  const byProject = new Map(current.map((d) => [d.projectId, d]));
  return new Map(
    rows.map((row) => {
      const d = byProject.get(row.id);
      const asleep = !!d?.asleepAt && !d.crashedAt;
      const state = (status: ProjectStatus, statusReason: string | null = null): [string, ProjectState] => [row.id, { status, statusReason, asleep }];
      if (row.disabledAt) return state("disabled");
      if (!d) return state("created");
      if (d.crashedAt)
        return state(
          "crashed",
          `The app of deployment ${d.id} crashed more often than the restart policy allows, or could not be started, and was stopped at ${d.crashedAt.toISOString()}: deploy again or promote another deployment (its runtime logs say why)`,
        );
      if (d.asleepAt || d.port !== null) return state("live");
      return state(
        "degraded",
        `The app of deployment ${d.id} does not answer now: it is starting, restarting after a crash, or a start is being retried (its runtime logs say which)`,
      );
    }),
  );
}
