/**
 * Deployment artifacts and the organizations' storage caps. Runs on both
 * runtimes (no node:*): the runner's work-directory measurement is Node-only
 * (functions/self-hosted/work-dir-usage.ts) and only records its figure here.
 *
 * **Lifetime.** An upload or local deployment's artifact (`artifacts/<orgId>/<id>.tar.gz`)
 * is kept while it may still be needed: while the deployment is queued, building or
 * deploying (the runner reads it), and while it is `ready` and not pruned (it can be
 * promoted, and a redeploy of the project copies the last upload's artifact). A
 * deployment that ended `failed` or `canceled`, or whose build the runner pruned, can
 * never be promoted again (promote refuses all three), so its artifact is removed and
 * its key cleared (discardArtifact): by the cancel route for a queued deployment (no
 * runner holds it), by the runner after a failure, a cancel during a build and a prune,
 * and by the upload sweep for any left behind (a removal that failed, a runner that
 * died), DISCARD_GRACE_MS after the deployment ended. A crashed ready deployment keeps
 * its artifact until it is pruned.
 *
 * **Caps.** Per organization, over its deployments: the stored artifacts' bytes
 * (`artifact_bytes` of rows still holding an `artifact_key`) against ORG_ARTIFACT_QUOTA_MB,
 * and the runner's kept work directories' bytes (`work_dir_bytes`, measured once a
 * deployment is ready, of rows still ready and not pruned) against ORG_WORKDIR_QUOTA_MB.
 * A deployment whose artifact would take the organization past its artifact cap, or
 * any deployment while its kept work directories are at or past theirs, is refused
 * with 409 naming the figures and the setting. The check and the insert run under the
 * organization's row lock (insertQueued), so concurrent deployments never both fit
 * beyond the artifact cap; the work-directory cap is checked against what finished
 * builds recorded, so builds in flight may take an organization past it by their own
 * size (each bounded by its project's `diskGb`).
 */
import { and, eq, inArray, isNotNull, isNull, like, lt, or, sql } from "drizzle-orm";
import { deployments, organizations } from "../../shared/db/schema";
import type { Db, Executor, Tx } from "../../shared/db/types";
import { describeError } from "../../shared/http/error-log";
import { ApiError } from "../../shared/http/errors";
import type { Logger } from "../../shared/http/logger";
import { DEFAULT_QUOTA_MB, DEFAULT_STORAGE_QUOTAS, describeBytes, MIB, QUOTA_SETTINGS, type StorageQuotas } from "../../shared/storage/quotas";
import { ARTIFACT_KEY, type UploadStorage } from "../../shared/storage/types";

/** A deployment that ended this long ago and still holds an artifact it can no longer use is swept. */
export const DISCARD_GRACE_MS = 10 * 60 * 1000;

export interface OrgStorage {
  /** Bytes of the organization's stored deployment artifacts. */
  artifactBytes: number;
  /** Bytes of the runner's kept work directories of its deployments. */
  workDirBytes: number;
}

/** What the organization's deployments hold now, as recorded. */
export async function orgStorage(ex: Executor, orgId: string): Promise<OrgStorage> {
  const [row] = await ex
    .select({
      artifacts: sql<string>`coalesce(sum(${deployments.artifactBytes}) filter (where ${deployments.artifactKey} is not null), 0)`,
      workDirs: sql<string>`coalesce(sum(${deployments.workDirBytes}) filter (where ${deployments.status} = 'ready' and ${deployments.prunedAt} is null), 0)`,
    })
    .from(deployments)
    // The partial index deployments_org_storage_idx holds exactly these rows.
    .where(and(eq(deployments.orgId, orgId), or(isNotNull(deployments.artifactKey), isNotNull(deployments.workDirBytes))));
  return { artifactBytes: Number(row?.artifacts ?? 0), workDirBytes: Number(row?.workDirs ?? 0) };
}

const mbOf = (bytes: number) => String(Math.round((bytes / MIB) * 1e6) / 1e6);

/**
 * Why a new deployment does not fit, or null. `artifactBytes`: the size of the
 * artifact it stores (undefined for a git deployment, which stores none).
 */
export function storageRefusal(used: OrgStorage, quotas: StorageQuotas, artifactBytes: number | undefined): ApiError | null {
  const { artifactBytes: artifactCap, workDirBytes: workDirCap } = quotas;
  if (artifactBytes !== undefined && artifactCap > 0 && used.artifactBytes + artifactBytes > artifactCap) {
    return new ApiError(
      "conflict",
      `The organization's stored deployment artifacts would exceed its cap: ${describeBytes(used.artifactBytes)} stored + ${describeBytes(artifactBytes)} ` +
        `for this deployment > ${describeBytes(artifactCap)} (${QUOTA_SETTINGS.artifacts}=${mbOf(artifactCap)}). ` +
        "Artifacts of failed, canceled and pruned deployments are removed; delete projects you no longer need " +
        `(DELETE /api/projects/{id}), or ask the operator to raise ${QUOTA_SETTINGS.artifacts}`,
    );
  }
  if (workDirCap > 0 && used.workDirBytes >= workDirCap) {
    return new ApiError(
      "conflict",
      `The organization's kept builds (the runner's work directories) are at its cap: ${describeBytes(used.workDirBytes)} of ` +
        `${describeBytes(workDirCap)} (${QUOTA_SETTINGS.workDirs}=${mbOf(workDirCap)}). ` +
        "Each environment keeps its current build and the newest 3 superseded ones; delete projects you no longer need " +
        `(DELETE /api/projects/{id}), or ask the operator to raise ${QUOTA_SETTINGS.workDirs}`,
    );
  }
  return null;
}

/** The caps as the deploying routes' OpenAPI descriptions state them. */
export const STORAGE_CAPS_DESCRIPTION =
  "**Storage caps per organization** (409 with the figures, naming the setting): the stored artifacts of its upload and local deployments " +
  `(\`${QUOTA_SETTINGS.artifacts}\`, default ${DEFAULT_QUOTA_MB.artifacts} MB) may not exceed the cap with this deployment's artifact, and no deployment is queued while ` +
  `the self-hosted runner's kept builds (work directories) are at theirs (\`${QUOTA_SETTINGS.workDirs}\`, default ${DEFAULT_QUOTA_MB.workDirs} MB; 0 turns a cap off). ` +
  "An artifact is kept while its deployment may use it: queued to deploying, and ready and not pruned (it can be promoted, and a redeploy copies it); " +
  "a failed, canceled or pruned deployment's artifact and work directory are removed. 409, not 429: waiting frees nothing, so there is no Retry-After.";

export const quotasOf = (config: { storageQuotas?: StorageQuotas }): StorageQuotas => config.storageQuotas ?? DEFAULT_STORAGE_QUOTAS;

/**
 * The early check, before an artifact is copied or packed (nothing locked): refuses
 * an organization already past a cap without copying a byte. `artifactBytes` is
 * the expected size when known (else 0); the exact check is lockedStorageCheck's.
 */
export async function precheckStorage(db: Db, orgId: string, quotas: StorageQuotas, artifactBytes: number | undefined): Promise<void> {
  const refusal = storageRefusal(await orgStorage(db, orgId), quotas, artifactBytes);
  if (refusal) throw refusal;
}

/**
 * The exact check, in the transaction that inserts the deployment: the
 * organization's row is locked (FOR NO KEY UPDATE: other deployments of the
 * organization wait here, foreign-key checks of its other rows do not), so
 * the sum read and the insert that follows are one step for its deployments.
 */
export async function lockedStorageCheck(tx: Tx, orgId: string, quotas: StorageQuotas, artifactBytes: number | undefined): Promise<void> {
  await tx.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, orgId)).for("no key update");
  const refusal = storageRefusal(await orgStorage(tx, orgId), quotas, artifactBytes);
  if (refusal) throw refusal;
}

export interface ArtifactDeps {
  db: Db;
  /** The upload store; absent (no uploads configured): the key stays for a later sweep. */
  uploads?: UploadStorage;
  logger: Logger;
}

/**
 * Removes the artifact of a deployment that can no longer be promoted (failed,
 * canceled or pruned), clears its key and size, and clears its recorded
 * work-directory size. Anything else (queued, building, deploying, ready and not
 * pruned, a lease lost to another runner) is left as it is. Idempotent; never
 * throws: a failure is logged and the key stays, for the sweep to retry.
 * Answers whether an artifact was removed.
 */
export async function discardArtifact(deps: ArtifactDeps, id: string): Promise<boolean> {
  try {
    const [d] = await deps.db
      .select({ status: deployments.status, prunedAt: deployments.prunedAt, artifactKey: deployments.artifactKey, workDirBytes: deployments.workDirBytes })
      .from(deployments)
      .where(eq(deployments.id, id));
    if (!d || !(d.status === "failed" || d.status === "canceled" || d.prunedAt)) return false;
    if (d.workDirBytes !== null) await deps.db.update(deployments).set({ workDirBytes: null }).where(eq(deployments.id, id));
    // Only a deployment's own copy: a key elsewhere (never written by the API) is not this deployment's to remove.
    const key = d.artifactKey;
    if (!key || !ARTIFACT_KEY.test(key) || !deps.uploads) return false;
    await deps.uploads.remove(key);
    await deps.db
      .update(deployments)
      .set({ artifactKey: null, artifactBytes: null })
      .where(and(eq(deployments.id, id), eq(deployments.artifactKey, key)));
    return true;
  } catch (error) {
    deps.logger.error("artifact_discard_failed", { deploymentId: id, ...describeError(error) });
    return false;
  }
}

/** The runner's measurement of a ready deployment's kept work directory (ignored once it is pruned or no longer ready). */
export async function recordWorkDirBytes(db: Db, id: string, bytes: number): Promise<void> {
  await db
    .update(deployments)
    .set({ workDirBytes: bytes })
    .where(and(eq(deployments.id, id), eq(deployments.status, "ready"), isNull(deployments.prunedAt)));
}

/**
 * The upload sweep's part (both runtimes): artifacts of deployments that ended
 * failed or canceled, or were pruned, more than DISCARD_GRACE_MS ago are removed;
 * and kept artifacts stored before sizes were recorded get their size. Answers how
 * many artifacts were removed.
 */
export async function sweepArtifacts(deps: ArtifactDeps & { now: Date; batch?: number }): Promise<number> {
  const { db, uploads, now } = deps;
  if (!uploads) return 0;
  const cutoff = new Date(now.getTime() - DISCARD_GRACE_MS);
  const batch = deps.batch ?? 200;
  const stale = await db
    .select({ id: deployments.id })
    .from(deployments)
    .where(
      and(
        like(deployments.artifactKey, "artifacts/%"),
        or(and(inArray(deployments.status, ["failed", "canceled"]), lt(deployments.finishedAt, cutoff)), lt(deployments.prunedAt, cutoff)),
      ),
    )
    .limit(batch);
  let removed = 0;
  for (const { id } of stale) if (await discardArtifact(deps, id)) removed++;
  const unsized = await db
    .select({ id: deployments.id, key: deployments.artifactKey })
    .from(deployments)
    .where(and(like(deployments.artifactKey, "artifacts/%"), isNull(deployments.artifactBytes)))
    .limit(batch);
  for (const { id, key } of unsized) {
    try {
      // Nothing stored there counts as 0 (and is not asked about again).
      const size = (await uploads.size(key!)) ?? 0;
      await db
        .update(deployments)
        .set({ artifactBytes: size })
        .where(and(eq(deployments.id, id), eq(deployments.artifactKey, key!)));
    } catch (error) {
      deps.logger.error("artifact_size_failed", { deploymentId: id, ...describeError(error) });
    }
  }
  if (removed > 0) deps.logger.info("artifact sweep", { removed });
  return removed;
}
