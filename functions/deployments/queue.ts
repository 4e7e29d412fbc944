/**
 * Queueing a deployment, shared by POST /api/deployments and POST
 * /api/deployments/build/access: the target environment, and an upload's durable
 * artifact with the compose services that go with it (a local folder's snapshot
 * likewise, queueLocal).
 *
 * An upload deployment never points at a session's tarball: the session (and its
 * tarball) expires and is swept. The tarball is copied inside the upload store to
 * `artifacts/<orgId>/<deploymentId>.tar.gz` (S3 CopyObject; an atomic file copy on
 * disk), a key no upload sweep removes while the deployment may use it, before the
 * deployment is recorded with the copy's size. The organization's storage caps are
 * checked before the copy (an organization past them copies nothing) and again, exactly,
 * where the deployment is inserted (artifacts.ts); a refused copy is removed.
 */
import { and, eq } from "drizzle-orm";
import type { Keyring, SecretContext } from "../../shared/crypto/keyring";
import { environments, type ServiceSpec } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import type { AppContext } from "../../shared/http/context";
import { ApiError, badRequest } from "../../shared/http/errors";
import { newId } from "../../shared/ids";
import { artifactKeyFor } from "../../shared/storage/types";
import type { ParsedService } from "../projects/folder/compose";
import { decryptCaptured, serviceEnvContext } from "../projects/folder/services";
import { type EnvironmentRow, findEnvironment } from "../projects/environments-store";
import { findProject, type ProjectRow } from "../projects/store";
import { lockedStorageCheck, precheckStorage, quotasOf } from "./artifacts";
import { insertPinnedDeployment } from "./config-snapshot";
import { type PlacementFields, placementFor } from "./placement-store";
import { type DeploymentRow, type NewDeployment, type PreviousUpload, projectServiceRows, type UploadSessionRow } from "./store";

/** Compose environment values of a deployment, per service (what `services_ciphertext` holds). */
export type ServiceValues = Record<string, Record<string, string>>;

/** Where a deployment's compose values live (AES-GCM additional data): bound to the deployment. */
export const deploymentServicesContext = (orgId: string, deploymentId: string): SecretContext => ({
  orgId,
  table: "deployments",
  column: "services",
  rowId: deploymentId,
});

/** The runner's read of a deployment's compose values (in memory only). */
export async function decryptDeploymentServices(keyring: Keyring, d: Pick<DeploymentRow, "orgId" | "id" | "servicesCiphertext">): Promise<ServiceValues> {
  if (!d.servicesCiphertext) return {};
  return JSON.parse(await keyring.decrypt(d.servicesCiphertext, deploymentServicesContext(d.orgId, d.id))) as ServiceValues;
}

export const disabledConflict = () => new ApiError("conflict", "The project is disabled: enable it (POST /api/projects/{id}/enable) to deploy");

/** The named environment (400 naming `environment` when the project has none such), else production. */
export async function environmentFor(c: AppContext, project: ProjectRow, name: string | undefined): Promise<EnvironmentRow> {
  if (name !== undefined) {
    const env = await findEnvironment(c.get("db"), project.id, name);
    if (!env) throw badRequest("environment", `The project has no environment named ${name}`);
    return env;
  }
  const [env] = await c
    .get("db")
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, project.id), eq(environments.kind, "production")));
  if (!env) throw new ApiError("conflict", "The project has no production environment");
  return env;
}

interface ServiceSet {
  specs: Record<string, ServiceSpec>;
  values: ServiceValues;
}

const specOf = (s: ServiceSpec): ServiceSpec => ({ image: s.image, build: s.build, command: s.command, ports: s.ports, dependsOn: s.dependsOn });

/**
 * The services that go with an upload deployment: the project's (the last
 * ensure's), else the ones the session's scan parsed, else the previous upload
 * deployment's; null for a folder without compose services.
 */
async function servicesFor(
  c: AppContext,
  orgId: string,
  projectId: string,
  from: { session?: UploadSessionRow; previous?: PreviousUpload },
): Promise<ServiceSet | null> {
  const keyring = c.get("keyring");
  const rows = await projectServiceRows(c.get("db"), projectId);
  if (rows.length > 0) {
    const set: ServiceSet = { specs: {}, values: {} };
    for (const r of rows) {
      set.specs[r.name] = specOf(r.spec);
      if (r.envCiphertext) set.values[r.name] = JSON.parse(await keyring.decrypt(r.envCiphertext, serviceEnvContext(orgId, projectId, r.name)));
    }
    return set;
  }
  const parsed = (from.session?.scan as { services?: ParsedService[] } | null | undefined)?.services;
  if (from.session && parsed?.length) {
    const captured = await decryptCaptured(keyring, orgId, from.session.id, from.session.servicesCiphertext);
    const set: ServiceSet = { specs: {}, values: {} };
    for (const s of parsed) {
      set.specs[s.name] = specOf(s);
      if (Object.hasOwn(captured, s.name) && Object.keys(captured[s.name]!).length) set.values[s.name] = captured[s.name]!;
    }
    return set;
  }
  if (from.previous?.services) {
    return { specs: from.previous.services, values: await decryptDeploymentServices(keyring, from.previous) };
  }
  return null;
}

/**
 * Queues an upload deployment of `project`: copies the session's tarball (or the
 * previous upload deployment's artifact) to the new deployment's own artifact key,
 * records the services and their values re-encrypted for it, then inserts it
 * under the project's row lock (a disable that raced wins: 409, and the copy is
 * removed again).
 */
export async function queueUpload(
  c: AppContext,
  input: {
    orgId: string;
    userId: string | null;
    project: ProjectRow;
    env: EnvironmentRow;
    session?: UploadSessionRow;
    previous?: PreviousUpload;
    placed?: PlacementFields;
  },
): Promise<DeploymentRow> {
  const uploads = c.get("services").uploads;
  if (!uploads) throw new ApiError("internal", "Folder uploads are not configured on this instance");
  const { orgId, project } = input;
  const from = input.session?.objectKey ?? input.previous?.artifactKey;
  if (!from) {
    throw new ApiError(
      "conflict",
      input.previous
        ? "The project's last uploaded folder is no longer stored (its deployments failed or were canceled, and their artifacts were removed): upload it again (wsp deploy)"
        : "The project has no uploaded folder to deploy: upload it again (wsp deploy)",
    );
  }
  const quotas = quotasOf(c.get("config"));
  await precheckStorage(c.get("db"), orgId, quotas, input.session?.sizeBytes ?? input.previous?.artifactBytes ?? 0);
  const id = newId("dpl");
  const artifactKey = artifactKeyFor(orgId, id);
  if (!(await uploads.copy(from, artifactKey))) {
    throw new ApiError("conflict", "The uploaded folder is no longer stored: upload it again (wsp deploy)");
  }
  try {
    // The copy's own size is what the organization stores from now on.
    const artifactBytes = (await uploads.size(artifactKey)) ?? 0;
    const services = await servicesFor(c, orgId, project.id, input);
    const values = services && Object.keys(services.values).length ? services.values : null;
    const fields: NewDeployment = {
      orgId,
      projectId: project.id,
      environmentId: input.env.id,
      createdBy: input.userId,
      source: "upload",
      artifactKey,
      artifactBytes,
      uploadSessionId: input.session?.id ?? input.previous?.uploadSessionId ?? null,
      services: services?.specs ?? null,
      servicesCiphertext: values ? await c.get("keyring").encrypt(JSON.stringify(values), deploymentServicesContext(orgId, id)) : null,
      ...input.placed,
    };
    return await insertQueued(c, orgId, project.id, fields, id);
  } catch (e) {
    await uploads.remove(artifactKey).catch(() => {});
    throw e;
  }
}

/**
 * Queues a local deployment of a local-folder project (self-hosted): the folder
 * is snapshotted now, through the Node-only local-folders service, into the new
 * deployment's artifact key (a gzipped tarball honouring .gitignore/.dockerignore),
 * so the runner builds what the folder held when queued. On the Worker there is
 * no such service: 409. The project's compose services, if any, go with it.
 */
export async function queueLocal(
  c: AppContext,
  input: { orgId: string; userId: string | null; project: ProjectRow & { localPath: string }; env: EnvironmentRow; placed?: PlacementFields },
): Promise<DeploymentRow> {
  const folders = c.get("services").localFolders;
  if (!folders) throw new ApiError("conflict", "The project deploys from a local folder: deploy it on the self-hosted instance that holds the folder");
  const uploads = c.get("services").uploads;
  if (!uploads) throw new ApiError("internal", "Folder uploads are not configured on this instance");
  const { orgId, project } = input;
  // The snapshot's size is known once packed: an organization already at a cap packs nothing.
  await precheckStorage(c.get("db"), orgId, quotasOf(c.get("config")), 0);
  const id = newId("dpl");
  const artifactKey = artifactKeyFor(orgId, id);
  const snapshot = await folders.snapshot({ path: project.localPath, key: artifactKey, now: c.get("clock")() });
  try {
    const services = await servicesFor(c, orgId, project.id, {});
    const values = services && Object.keys(services.values).length ? services.values : null;
    const fields: NewDeployment = {
      orgId,
      projectId: project.id,
      environmentId: input.env.id,
      createdBy: input.userId,
      source: "local",
      artifactKey,
      artifactBytes: snapshot.sizeBytes,
      services: services?.specs ?? null,
      servicesCiphertext: values ? await c.get("keyring").encrypt(JSON.stringify(values), deploymentServicesContext(orgId, id)) : null,
      ...input.placed,
    };
    return await insertQueued(c, orgId, project.id, fields, id);
  } catch (e) {
    await uploads.remove(artifactKey).catch(() => {});
    throw e;
  }
}

/**
 * Inserts a queued deployment under the project's row lock (a disable or delete
 * that raced the lookups wins) and the organization's storage check (409 past a
 * cap, exact under the organization's row lock), with the environment's
 * configuration pinned in the same transaction (config-snapshot.ts). The caller answers with the
 * row as queued, then wakes the runner (queuedView): woken first, a runner could
 * claim it before the answer is read, and the 201 would say `building`.
 * Without placement fields (a deploy with no per-deploy choice) it is placed by
 * the queuing user's Settings (placement-store.ts).
 */
export async function insertQueued(
  c: AppContext,
  orgId: string,
  projectId: string,
  fields: NewDeployment,
  id = newId("dpl"),
  /** Written in the same transaction (a forwarded git credential: a runner claiming the row finds it). */
  within?: (tx: Db, row: DeploymentRow) => Promise<void>,
): Promise<DeploymentRow> {
  const now = c.get("clock")();
  const quotas = quotasOf(c.get("config"));
  const placed = fields.placement === undefined ? await placementFor(c, orgId, fields.createdBy ?? null) : {};
  const row = await c.get("db").transaction(async (tx) => {
    const locked = await findProject(tx, orgId, projectId, "key share");
    if (locked.disabledAt) throw disabledConflict();
    await lockedStorageCheck(tx, orgId, quotas, fields.artifactKey ? (fields.artifactBytes ?? 0) : undefined);
    const inserted = await insertPinnedDeployment(tx, c.get("keyring"), { ...fields, ...placed }, now, id);
    await within?.(tx as Db, inserted);
    return inserted;
  });
  return row;
}
