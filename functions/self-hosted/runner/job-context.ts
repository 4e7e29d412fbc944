/**
 * What a job needs from the database, as plain data: the deployment as the runner
 * sees it, its context (pinned project, environment, decrypted variables) and its
 * clone credential. One way to read each: the in-process control (db-control.ts)
 * and the runner protocol's routes (functions/servers/runner-jobs.ts) both call these.
 */
import type { Keyring } from "../../../shared/crypto/keyring";
import type { Db } from "../../../shared/db/types";
import type { DeploymentRow } from "../../deployments/store";
import { cloneTokenFor } from "../../projects/git-store";
import type { JobContext, RunnerDeployment, RunnerProject } from "./control";
import { decryptServiceValues, jobRows, jobVariables } from "./store";

/** The fields of a deployment row the runner uses (nothing else of the row crosses). */
export function runnerDeployment(d: DeploymentRow): RunnerDeployment {
  return {
    id: d.id,
    orgId: d.orgId,
    projectId: d.projectId,
    environmentId: d.environmentId,
    status: d.status,
    current: d.current,
    source: d.source,
    artifactKey: d.artifactKey,
    gitProvider: d.gitProvider,
    gitOwner: d.gitOwner,
    gitRepo: d.gitRepo,
    commitSha: d.commitSha,
    branch: d.branch,
    services: d.services,
    createdBy: d.createdBy,
  };
}

/** The deployment with its pinned project, environment and decrypted variables; undefined when it does not exist. Never logged. */
export async function jobContext(db: Db, keyring: Keyring, id: string): Promise<JobContext | undefined> {
  const rows = await jobRows(db, id);
  if (!rows) return undefined;
  const { env, secrets } = await jobVariables(db, keyring, rows.d);
  const p = rows.project;
  const project: RunnerProject = {
    id: p.id,
    orgId: p.orgId,
    name: p.name,
    options: p.options,
    diskGb: p.diskGb,
    buildMemoryMb: p.buildMemoryMb,
    buildCpuCores: p.buildCpuCores,
    productionMemoryMb: p.productionMemoryMb,
    productionCpuCores: p.productionCpuCores,
  };
  return {
    d: runnerDeployment(rows.d),
    project,
    environment: rows.environment,
    env,
    secrets,
    serviceValues: await decryptServiceValues(keyring, rows.d),
  };
}

/** The clone token of a git deployment (decrypted), or null. The project's applies to every deployment; a user's default token only to deployments that user queued. */
export async function cloneCredentialOf(db: Db, keyring: Keyring, id: string): Promise<string | null> {
  const rows = await jobRows(db, id);
  return rows ? cloneTokenFor(db, keyring, rows.project, rows.d.createdBy) : null;
}
