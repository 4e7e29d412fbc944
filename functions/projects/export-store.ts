/**
 * The transfer bundle's reads (POST /api/projects/{id}/export, and the transfer
 * routes on this side, which call readProjectExport directly): every row of a
 * project's configuration, secrets decrypted with the contexts their writers bound
 * them to. The rows are read in one read-only REPEATABLE READ transaction, so the
 * bundle is one consistent snapshot; decryption happens after it ends (no crypto
 * while a transaction is open). The plaintext exists only in the returned object:
 * nothing here logs it.
 */
import { and, asc, eq, sql } from "drizzle-orm";
import type { Keyring } from "../../shared/crypto/keyring";
import { domains, environments, envVars, projectServices } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import { lastUpload } from "../deployments/store";
import type { ProjectExport } from "./export-schema";
import { secretContext } from "./env-store";
import { serviceEnvContext } from "./folder/services";
import { optionsView, resourcesView } from "./schema";
import { findProject, hasRepository, type ProjectRow, sourceKind } from "./store";

/** The bundle as the store reads it: the artifact URL is the route's (it needs the upload store), the key is given instead. */
export type ProjectExportRead = Omit<ProjectExport, "source"> & {
  source: { kind: ProjectExport["source"]["kind"] };
  /** The upload store key of the tarball an upload project redeploys (null for other sources, or when none is stored). */
  latestArtifactKey: string | null;
};

/** Where the project's clone token lives: the context clone-token.ts encrypts it with (and git-store.ts decrypts it with). */
const cloneTokenContext = (p: Pick<ProjectRow, "orgId" | "id">) => ({ orgId: p.orgId, table: "projects", column: "clone_token", rowId: p.id });

/**
 * The key of the tarball an upload project's next deployment would take: the
 * same lookup POST /api/deployments uses for "redeploy the last upload"
 * (`lastUpload`: the newest live scanned session bound to the project, else the
 * newest upload deployment's durable artifact). Null when there is none.
 */
export async function latestUploadKey(ex: Executor, projectId: string, now: Date): Promise<string | null> {
  const upload = await lastUpload(ex, projectId, now);
  return upload?.session?.objectKey ?? upload?.previous?.artifactKey ?? null;
}

/**
 * The caller's project as a transfer bundle, secret values in the clear. A
 * foreign, deleted (or moved) and unknown id answer the usual 404 (findProject).
 * Environments: production first, then the previews by name, each with all of its
 * variables by key. Domains: the primary last (so a receiver that makes the last
 * connected domain primary, or connects them in order and then marks it, ends
 * with the same primary). Services: the project's set as the last ensure stored
 * it, in order, values in the clear.
 */
export async function readProjectExport(db: Db, keyring: Keyring, orgId: string, projectId: string, now: Date = new Date()): Promise<ProjectExportRead> {
  const rows = await db.transaction(
    async (tx) => {
      const project = await findProject(tx, orgId, projectId);
      const envRows = await tx
        .select()
        .from(environments)
        .where(eq(environments.projectId, project.id))
        .orderBy(sql`${environments.kind} <> 'production'`, asc(environments.name));
      const varRows = await tx
        .select()
        .from(envVars)
        .where(and(eq(envVars.projectId, project.id), eq(envVars.orgId, orgId)))
        .orderBy(asc(envVars.key));
      const domainRows = await tx
        .select({ hostname: domains.hostname, primary: domains.isPrimary })
        .from(domains)
        .where(eq(domains.projectId, project.id))
        .orderBy(asc(domains.isPrimary), asc(domains.createdAt), asc(domains.id));
      const serviceRows = await tx.select().from(projectServices).where(eq(projectServices.projectId, project.id)).orderBy(asc(projectServices.position));
      const kind = sourceKind(project);
      const latestArtifactKey = kind === "upload" ? await latestUploadKey(tx, project.id, now) : null;
      return { project, envRows, varRows, domainRows, serviceRows, kind, latestArtifactKey };
    },
    { isolationLevel: "repeatable read", accessMode: "read only" },
  );
  const { project } = rows;

  const environmentsOut: ProjectExport["environments"] = [];
  for (const env of rows.envRows) {
    const scope = { orgId, projectId: project.id, environmentId: env.id };
    const vars: ProjectExport["environments"][number]["env"] = [];
    for (const v of rows.varRows) {
      if (v.environmentId !== env.id) continue;
      const value = v.isSecret ? await keyring.decrypt(v.valueCiphertext!, secretContext(scope, v.key)) : v.value!;
      vars.push({ key: v.key, value, isSecret: v.isSecret });
    }
    environmentsOut.push({ name: env.name, kind: env.kind, branch: env.branch, env: vars });
  }

  const services: ProjectExport["services"] = [];
  for (const s of rows.serviceRows) {
    const values: Record<string, string> = s.envCiphertext
      ? JSON.parse(await keyring.decrypt(s.envCiphertext, serviceEnvContext(orgId, project.id, s.name)))
      : {};
    // In the order the ensure stored the keys.
    const environment = Object.fromEntries(s.envKeys.filter((k) => Object.hasOwn(values, k)).map((k) => [k, values[k]!]));
    services.push({
      name: s.name,
      image: s.spec.image,
      build: s.spec.build,
      command: s.spec.command,
      ports: s.spec.ports,
      dependsOn: s.spec.dependsOn,
      environment,
    });
  }

  return {
    id: project.id,
    name: project.name,
    framework: project.framework,
    disabled: project.disabledAt !== null,
    git: hasRepository(project)
      ? { provider: project.gitProvider!, owner: project.gitOwner!, repo: project.gitRepo!, branch: project.gitBranch, autoDeploy: project.autoDeploy }
      : null,
    options: optionsView(project.options),
    resources: resourcesView(project),
    environments: environmentsOut,
    domains: rows.domainRows,
    services,
    cloneToken: project.cloneTokenCiphertext ? await keyring.decrypt(project.cloneTokenCiphertext, cloneTokenContext(project)) : null,
    source: { kind: rows.kind },
    latestArtifactKey: rows.latestArtifactKey,
  };
}
