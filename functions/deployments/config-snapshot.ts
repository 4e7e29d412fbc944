/**
 * A deployment pins, when queued, the configuration that decides what runs: the
 * environment's variables (secrets included, encrypted for the deployment), the
 * project's resources and its options (commands, directories). The runner builds
 * and launches from that snapshot, so a promote (rollback) restores the
 * configuration with the code, and only a new deployment takes the live one.
 *
 * - Taken in the insert's transaction, under a share lock on the environment row:
 *   a merge of its variables (which holds that row FOR NO KEY UPDATE) is either
 *   wholly in the snapshot or wholly after it.
 * - With it goes the variables' digest that needsRedeploy compares (config-drift.ts).
 * - Deployments queued before snapshots existed have none: the runner reads the
 *   live configuration for them, and they never read as needing a redeploy.
 */
import { eq } from "drizzle-orm";
import type { Keyring, SecretContext } from "../../shared/crypto/keyring";
import { type ConfigSnapshot, environments, projects } from "../../shared/db/schema";
import type { Tx } from "../../shared/db/types";
import { type DecryptedVariable, decryptedEnv } from "../projects/env-store";
import { type ProjectConfigRow, resourcesOf, variablesDigest } from "./config-drift";
import { insertDeployment, type DeploymentRow, type NewDeployment } from "./store";

/** One variable of a snapshot (what env_snapshot_ciphertext holds, as a JSON array ordered by key). */
export type PinnedVariable = DecryptedVariable;

/** Where a deployment's variables live (AES-GCM additional data): bound to the deployment. */
export const envSnapshotContext = (orgId: string, deploymentId: string): SecretContext => ({
  orgId,
  table: "deployments",
  column: "env_snapshot",
  rowId: deploymentId,
});

/**
 * Reads and encrypts the environment's configuration for deployment `id`, then
 * inserts the deployment with it, all in the caller's transaction (every path that
 * queues a deployment comes here: the deploy route, uploads, local folders, pushes).
 */
export async function insertPinnedDeployment(tx: Tx, keyring: Keyring, fields: NewDeployment, now: Date, id: string): Promise<DeploymentRow> {
  const scope = { orgId: fields.orgId, projectId: fields.projectId, environmentId: fields.environmentId };
  // Merges of the environment's variables take turns on this row: one in flight is waited for, the next waits for this commit.
  await tx.select({ id: environments.id }).from(environments).where(eq(environments.id, scope.environmentId)).for("share");
  const [project] = await tx
    .select({
      productionCpuCores: projects.productionCpuCores,
      productionMemoryMb: projects.productionMemoryMb,
      buildCpuCores: projects.buildCpuCores,
      buildMemoryMb: projects.buildMemoryMb,
      diskGb: projects.diskGb,
      port: projects.port,
      options: projects.options,
    })
    .from(projects)
    .where(eq(projects.id, scope.projectId));
  const variables: PinnedVariable[] = await decryptedEnv(tx, keyring, scope);
  const [digest] = await tx
    .select({ value: variablesDigest({ projectId: environments.projectId, environmentId: environments.id }) })
    .from(environments)
    .where(eq(environments.id, scope.environmentId));
  const configSnapshot: ConfigSnapshot = { resources: resourcesOf(project!), options: project!.options, variablesDigest: digest!.value };
  const envSnapshotCiphertext = await keyring.encrypt(JSON.stringify(variables), envSnapshotContext(scope.orgId, id));
  return insertDeployment(tx, { ...fields, configSnapshot, envSnapshotCiphertext }, now, id);
}

/** A deployment's pinned variables, secrets decrypted (in memory only: the runner's read); null for a deployment queued before snapshots. */
export async function pinnedVariables(keyring: Keyring, d: Pick<DeploymentRow, "orgId" | "id" | "envSnapshotCiphertext">): Promise<PinnedVariable[] | null> {
  if (!d.envSnapshotCiphertext) return null;
  return JSON.parse(await keyring.decrypt(d.envSnapshotCiphertext, envSnapshotContext(d.orgId, d.id))) as PinnedVariable[];
}

/** A project row with its resources and options replaced by what `snapshot` pinned. */
export function withPinnedConfig<P extends ProjectConfigRow>(project: P, snapshot: ConfigSnapshot): P {
  return { ...project, ...snapshot.resources, options: snapshot.options };
}
