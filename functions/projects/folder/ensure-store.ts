/**
 * Ensure, the folder-upload step that records a project: create or update it,
 * replace its service set, bind the upload session. One transaction, under the
 * session's and the project's row locks, so concurrent ensures of the same
 * project or session run one after the other.
 */
import { and, asc, eq, notInArray, sql } from "drizzle-orm";
import type { z } from "@hono/zod-openapi";
import type { Keyring } from "../../../shared/crypto/keyring";
import { projectServices, uploadSessions, type ProjectOptions } from "../../../shared/db/schema";
import type { Db, Executor, Tx } from "../../../shared/db/types";
import { ApiError, badRequest } from "../../../shared/http/errors";
import { ENSURED_TTL_MS } from "../../../shared/storage/limits";
import type { CapturedValues } from "./compose";
import type { ServiceInput, ServiceView } from "./schema";
import { decryptCaptured, restoreEnvironment, serviceEnvContext, serviceView } from "./services";
import { findSession } from "./store";
import type { EnsureBody } from "./ensure-schema";
import { findProject, insertProject, mergeOptions, updateProject, type ProjectRow, type ProjectSet } from "../store";

type Body = z.infer<typeof EnsureBody>;
type Service = z.infer<typeof ServiceInput>;

const OPTION_FIELDS = ["buildCommand", "installCommand", "startCommand", "outputDirectory"] as const;

function optionsOf(body: Body): Record<string, string> {
  return Object.fromEntries(OPTION_FIELDS.filter((k) => body[k] !== undefined).map((k) => [k, body[k]!]));
}

/** The fields the body carries; fields it leaves out keep their values. */
function ensuredFields(body: Body, gitProvider: ProjectRow["gitProvider"] | undefined, now: Date): ProjectSet {
  const options = optionsOf(body);
  return {
    name: body.name,
    ...(body.framework !== undefined ? { framework: body.framework } : {}),
    ...(body.gitOwner !== undefined ? { gitOwner: body.gitOwner } : {}),
    ...(body.gitRepo !== undefined ? { gitRepo: body.gitRepo } : {}),
    ...(body.gitBranch !== undefined ? { gitBranch: body.gitBranch } : {}),
    ...(gitProvider !== undefined ? { gitProvider } : {}),
    ...(Object.keys(options).length ? { options: mergeOptions(options, []) } : {}),
    updatedAt: now,
  };
}

const sqlExcluded = (column: string) => sql.raw(`excluded.${column}`);

/** The sent services become the whole set: the others are removed; masked values are restored from `captured` or dropped. */
async function replaceServices(
  tx: Tx,
  keyring: Keyring,
  scope: { orgId: string; projectId: string },
  services: Service[],
  captured: CapturedValues | undefined,
  now: Date,
) {
  const names = services.map((s) => s.name);
  await tx
    .delete(projectServices)
    .where(and(eq(projectServices.projectId, scope.projectId), names.length ? notInArray(projectServices.name, names) : undefined));
  if (services.length === 0) return;
  const rows = [];
  for (const [position, s] of services.entries()) {
    const env = restoreEnvironment(s.name, s.environment ?? {}, captured);
    const envKeys = Object.keys(env);
    rows.push({
      ...scope,
      name: s.name,
      position,
      spec: {
        image: s.image ?? null,
        build: s.build ? { context: s.build.context, dockerfile: s.build.dockerfile ?? null } : null,
        command: s.command ?? null,
        ports: s.ports ?? [],
        dependsOn: s.dependsOn ?? [],
      },
      envKeys,
      envCiphertext: envKeys.length ? await keyring.encrypt(JSON.stringify(env), serviceEnvContext(scope.orgId, scope.projectId, s.name)) : null,
      updatedAt: now,
    });
  }
  await tx
    .insert(projectServices)
    .values(rows)
    .onConflictDoUpdate({
      target: [projectServices.projectId, projectServices.name],
      set: {
        position: sqlExcluded("position"),
        spec: sqlExcluded("spec"),
        envKeys: sqlExcluded("env_keys"),
        envCiphertext: sqlExcluded("env_ciphertext"),
        updatedAt: sqlExcluded("updated_at"),
      },
    });
}

/** The project's services as read (values masked), in their order. */
export async function listServices(ex: Executor, projectId: string): Promise<ServiceView[]> {
  const rows = await ex.select().from(projectServices).where(eq(projectServices.projectId, projectId)).orderBy(asc(projectServices.position));
  return rows.map((r) => serviceView(r.name, r.spec, r.envKeys));
}

interface Ensured {
  row: ProjectRow;
  created: boolean;
  services: ServiceView[];
  uploadSessionId: string | null;
}

export async function ensureProject(db: Db, keyring: Keyring, orgId: string, body: Body, now: Date, reservedSlugs: readonly string[] = []): Promise<Ensured> {
  return db.transaction(async (tx) => {
    const session = body.uploadSessionId ? await findSession(tx, orgId, body.uploadSessionId, now, "update") : undefined;
    if (session && !session.scannedAt) {
      throw badRequest("uploadSessionId", "This upload has not been scanned; call POST /api/projects/folder/scan/{sessionId} first");
    }
    if (body.projectId && session?.projectId && session.projectId !== body.projectId) {
      throw new ApiError("conflict", "This upload session was already used for another project; open a new session");
    }
    // A session already used by an ensure updates that project again (a retried ensure creates no duplicate).
    const projectId = body.projectId ?? session?.projectId ?? undefined;
    const gitProvider = body.gitProvider ?? (session ? "upload" : undefined);

    let row: ProjectRow;
    let created = false;
    if (projectId) {
      await findProject(tx, orgId, projectId, "update");
      row = await updateProject(tx, orgId, projectId, ensuredFields(body, gitProvider, now));
    } else {
      row = await insertProject(
        tx,
        orgId,
        body,
        gitProvider ?? (body.gitOwner && body.gitRepo ? "github" : null),
        optionsOf(body) as ProjectOptions,
        reservedSlugs,
      );
      created = true;
    }

    if (body.services) {
      const captured = session ? await decryptCaptured(keyring, orgId, session.id, session.servicesCiphertext) : undefined;
      await replaceServices(tx, keyring, { orgId, projectId: row.id }, body.services, captured, now);
    }
    if (session) {
      const keep = new Date(Math.max(session.expiresAt.getTime(), now.getTime() + ENSURED_TTL_MS));
      await tx.update(uploadSessions).set({ projectId: row.id, expiresAt: keep }).where(eq(uploadSessions.id, session.id));
    }
    return { row, created, services: await listServices(tx, row.id), uploadSessionId: session?.id ?? null };
  });
}
