/**
 * The push webhook's SQL: the hook with what its project needs to decide, and
 * the delivery record. A delivery is recorded at most once per (project, body
 * digest): the insert skips on that unique key, so of two identical deliveries
 * at once one inserts and the other waits for it, then reads its row. The host's
 * delivery id is not signed (anyone holding a captured body can change it), so
 * it is kept for support only.
 */
import { and, eq, isNull, lt, lte, or } from "drizzle-orm";
import type { Keyring } from "../../shared/crypto/keyring";
import { environments, gitPushEvents, gitPushHooks, PUSH_OUTCOMES, projects, type PushOutcome } from "../../shared/db/schema";
import type { Db, Tx } from "../../shared/db/types";
import { newId } from "../../shared/ids";
import { insertPinnedDeployment } from "../deployments/config-snapshot";
import type { PlacementFields } from "../deployments/placement-store";
import { hookSecretContext } from "../projects/git-store";
import type { ProjectRow } from "../projects/store";
import type { Provider } from "./providers";

export const OUTCOMES = PUSH_OUTCOMES;
export type Outcome = PushOutcome;

/** A hook and the project state a delivery is judged against. */
export interface HookTarget {
  hookId: string;
  orgId: string;
  projectId: string;
  secretCiphertext: string;
  autoDeploy: boolean;
  /** `git_branch`, else the remote's default branch; null when neither is known. */
  deployBranch: string | null;
  disabled: boolean;
  /** The project as read with the hook: its provider decides the one signature scheme accepted. */
  project: ProjectRow;
}

export async function findHookTarget(db: Db, hookId: string): Promise<HookTarget | undefined> {
  const [row] = await db
    .select({ hook: gitPushHooks, project: projects })
    .from(gitPushHooks)
    .innerJoin(projects, and(eq(projects.id, gitPushHooks.projectId), eq(projects.orgId, gitPushHooks.orgId)))
    .where(eq(gitPushHooks.id, hookId));
  if (!row) return undefined;
  const { hook, project } = row;
  return {
    hookId: hook.id,
    orgId: hook.orgId,
    projectId: hook.projectId,
    secretCiphertext: hook.secret,
    autoDeploy: project.autoDeploy,
    deployBranch: project.gitBranch ?? project.gitDefaultBranch,
    disabled: project.disabledAt !== null,
    project,
  };
}

/** The hook's plain secret, or null when it cannot be decrypted (fail closed: every signature is then bad). */
export async function hookSecret(keyring: Keyring, hook: HookTarget): Promise<string | null> {
  try {
    return await keyring.decrypt(hook.secretCiphertext, hookSecretContext(hook.orgId, hook.hookId));
  } catch {
    return null;
  }
}

export interface DeliveryRecord {
  provider: Provider;
  event: string;
  ref: string | null;
  branch: string | null;
  commit: string | null;
  outcome: Outcome;
  /** Why a push queued nothing (`stale`); null otherwise. */
  reason: string | null;
  /** The deployment a `deploy_queued` push queued; null otherwise (or when the project had no repository to pin). */
  deploymentId?: string | null;
}

const recordColumns = {
  provider: gitPushEvents.provider,
  event: gitPushEvents.event,
  ref: gitPushEvents.ref,
  branch: gitPushEvents.branch,
  commit: gitPushEvents.commit,
  outcome: gitPushEvents.outcome,
  reason: gitPushEvents.reason,
  deploymentId: gitPushEvents.deploymentId,
};

/**
 * Queues the production deployment of a pushed commit, pinned to it and to the
 * environment's configuration (config-snapshot.ts). The project
 * row is locked (key share) so a concurrent delete or disable is either seen here
 * or waits; a project that lost its repository or was disabled meanwhile queues nothing.
 */
async function queuePushDeployment(
  tx: Tx,
  keyring: Keyring,
  hook: HookTarget,
  record: DeliveryRecord,
  now: Date,
  placed: PlacementFields | undefined,
): Promise<string | null> {
  const [project] = await tx
    .select({ provider: projects.gitProvider, owner: projects.gitOwner, repo: projects.gitRepo, disabledAt: projects.disabledAt })
    .from(projects)
    .where(and(eq(projects.id, hook.projectId), eq(projects.orgId, hook.orgId)))
    .for("key share");
  const [production] = await tx
    .select({ id: environments.id })
    .from(environments)
    .where(and(eq(environments.projectId, hook.projectId), eq(environments.kind, "production")));
  if (!project?.provider || project.provider === "upload" || !project.owner || !project.repo || project.disabledAt || !production) return null;
  const d = await insertPinnedDeployment(
    tx,
    keyring,
    {
      orgId: hook.orgId,
      projectId: hook.projectId,
      environmentId: production.id,
      createdBy: null,
      source: "git",
      gitProvider: project.provider,
      gitOwner: project.owner,
      gitRepo: project.repo,
      branch: record.branch,
      commitSha: record.commit,
      ...placed,
    },
    now,
    newId("dpl"),
  );
  return d.id;
}

const byBodyOf = (projectId: string, bodyDigest: string) => and(eq(gitPushEvents.projectId, projectId), eq(gitPushEvents.bodyDigest, bodyDigest));

/** The record of a body already received for the project (checked before asking the host; recordDelivery decides races). */
export async function findDelivery(db: Db, projectId: string, bodyDigest: string): Promise<DeliveryRecord | undefined> {
  const [row] = await db.select(recordColumns).from(gitPushEvents).where(byBodyOf(projectId, bodyDigest));
  return row;
}

/**
 * How long a body is remembered. Past it a replayed body is judged again, and
 * the branch-head check (branch-head.ts) still refuses anything but the head.
 */
export const DELIVERY_RETENTION_DAYS = 30;
const DAY_MS = 24 * 60 * 60 * 1000;

/** What identifies a delivery: the signed body's digest, and the host's (unsigned) delivery id for support. */
export interface DeliveryKey {
  bodyDigest: string;
  deliveryId: string | null;
}

/**
 * Records a delivery once per body. The first time: the event row and, for a
 * deploy, the project's last push (never moved back by an older delivery) and
 * the queued deployment of the pushed commit, in one transaction; the project's
 * records past the retention go. Again (a replay, whatever its delivery id):
 * nothing is written and the first record is returned.
 */
export async function recordDelivery(
  db: Db,
  keyring: Keyring,
  hook: HookTarget,
  key: DeliveryKey,
  record: DeliveryRecord,
  now: Date,
  /** Where a queued deployment goes (a push has no user: the placement defaults); absent: the column default, `local`. */
  placed?: PlacementFields,
): Promise<{ record: DeliveryRecord; replay: boolean }> {
  const byBody = byBodyOf(hook.projectId, key.bodyDigest);
  return db.transaction(async (tx) => {
    const [inserted] = await tx
      .insert(gitPushEvents)
      .values({ id: newId("gpe"), orgId: hook.orgId, projectId: hook.projectId, hookId: hook.hookId, ...key, receivedAt: now, ...record })
      .onConflictDoNothing({ target: [gitPushEvents.projectId, gitPushEvents.bodyDigest] })
      .returning(recordColumns);
    if (inserted) {
      await tx
        .delete(gitPushEvents)
        .where(and(eq(gitPushEvents.projectId, hook.projectId), lt(gitPushEvents.receivedAt, new Date(now.getTime() - DELIVERY_RETENTION_DAYS * DAY_MS))));
      if (record.outcome === "deploy_queued") {
        await tx
          .update(projects)
          .set({ lastPushCommit: record.commit, lastPushBranch: record.branch, lastPushAt: now })
          .where(and(eq(projects.id, hook.projectId), eq(projects.orgId, hook.orgId), or(isNull(projects.lastPushAt), lte(projects.lastPushAt, now))));
        const deploymentId = await queuePushDeployment(tx, keyring, hook, record, now, placed);
        if (deploymentId) await tx.update(gitPushEvents).set({ deploymentId }).where(byBody);
        return { record: { ...inserted, deploymentId }, replay: false };
      }
      return { record: inserted, replay: false };
    }
    // The conflicting row is committed (the insert waited for it), so this statement sees it.
    const [first] = await tx.select(recordColumns).from(gitPushEvents).where(byBody);
    if (!first) throw new Error("git push event vanished between insert and read");
    return { record: first, replay: true };
  });
}
