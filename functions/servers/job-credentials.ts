/**
 * Git identity forwarding (issue 22, item 7; Settings `forwardGitToServer`): the
 * local git credential `wsp deploy` read with `git credential fill` and sent with
 * POST /api/deployments, held for that one job only. One row per deployment in
 * `job_credentials`, encrypted with the keyring and bound to the organization, the
 * table and the deployment id (a row copied to another deployment does not decrypt).
 *
 * Its life, whichever ends it first:
 * - taken by the runner holding the job's lease when the clone starts: read and
 *   deleted in one statement (the runner keeps it in memory for that clone only,
 *   the fallback fetch of the branch included), so it is gone before the clone ends;
 * - the job leaving `queued`/`building` (finished, failed, canceled) or its
 *   `expires_at` passing: never served after, and deleted by the sweep that runs
 *   with every claim and every new deployment;
 * - the deployment deleted: the foreign key cascades.
 * Never logged, never in an API answer, never in a backup (operations/backup/tables.ts).
 */
import { and, eq, inArray, lt, notInArray, or, sql } from "drizzle-orm";
import type { Keyring, SecretContext } from "../../shared/crypto/keyring";
import { deployments, jobCredentials } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";
import type { CloneCredential } from "../self-hosted/runner/control";

export interface ForwardedCredential {
  username: string;
  password: string;
}

/** How long a forwarded credential may wait for its job to be claimed and cloned. */
export const FORWARDED_CREDENTIAL_TTL_MS = 30 * 60_000;

const context = (orgId: string, deploymentId: string): SecretContext => ({
  orgId,
  table: "job_credentials",
  column: "credential",
  rowId: deploymentId,
});

/** Stores the credential of a just-queued deployment (in the transaction or right after its insert). */
export async function storeForwardedCredential(
  db: Db,
  keyring: Keyring,
  d: { orgId: string; id: string },
  credential: ForwardedCredential,
  now: Date,
): Promise<void> {
  const ciphertext = await keyring.encrypt(JSON.stringify({ username: credential.username, password: credential.password }), context(d.orgId, d.id));
  await db
    .insert(jobCredentials)
    .values({ deploymentId: d.id, orgId: d.orgId, credentialCiphertext: ciphertext, expiresAt: new Date(now.getTime() + FORWARDED_CREDENTIAL_TTL_MS) })
    .onConflictDoUpdate({
      target: jobCredentials.deploymentId,
      set: { credentialCiphertext: ciphertext, expiresAt: new Date(now.getTime() + FORWARDED_CREDENTIAL_TTL_MS) },
    });
}

/**
 * The job's forwarded credential, read and deleted at once, unexpired; null: none. The caller
 * holds the job's lease (the runner protocol checks it; the in-process runner is this process)
 * and names the organization when it has one (the protocol: the runner's), so another
 * organization's deployment id finds nothing.
 */
export async function takeForwardedCredential(
  db: Db,
  keyring: Keyring,
  deploymentId: string,
  orgId: string | undefined,
  now: Date,
): Promise<ForwardedCredential | null> {
  const [row] = await db
    .delete(jobCredentials)
    .where(and(eq(jobCredentials.deploymentId, deploymentId), orgId === undefined ? undefined : eq(jobCredentials.orgId, orgId)))
    .returning({ orgId: jobCredentials.orgId, ciphertext: jobCredentials.credentialCiphertext, expiresAt: jobCredentials.expiresAt });
  if (!row || row.expiresAt.getTime() <= now.getTime()) return null;
  const value = JSON.parse(await keyring.decrypt(row.ciphertext, context(row.orgId, deploymentId))) as ForwardedCredential;
  return { username: value.username, password: value.password };
}

/** What a job clones with (RunnerControl.cloneCredential): its forwarded credential (taken), else the clone token that applies. */
export async function cloneCredentialOfJob(
  db: Db,
  keyring: Keyring,
  deploymentId: string,
  orgId: string | undefined,
  now: Date,
  token: () => Promise<string | null>,
): Promise<CloneCredential | null> {
  const forwarded = await takeForwardedCredential(db, keyring, deploymentId, orgId, now);
  if (forwarded) return forwarded;
  const t = await token();
  return t ? { token: t } : null;
}

/** Deletes the credential of one deployment (canceled, failed, finished). */
export async function dropForwardedCredential(db: Db, deploymentId: string): Promise<void> {
  await db.delete(jobCredentials).where(eq(jobCredentials.deploymentId, deploymentId));
}

/** Deletes every credential that expired or whose job is no longer queued or building. Returns how many. */
export async function sweepForwardedCredentials(db: Db, now: Date): Promise<number> {
  const ended = db
    .select({ id: deployments.id })
    .from(deployments)
    .where(
      and(inArray(deployments.id, db.select({ id: jobCredentials.deploymentId }).from(jobCredentials)), notInArray(deployments.status, ["queued", "building"])),
    );
  const gone = await db
    .delete(jobCredentials)
    .where(or(lt(jobCredentials.expiresAt, now), inArray(jobCredentials.deploymentId, ended)))
    .returning({ id: jobCredentials.deploymentId });
  return gone.length;
}

/** Whether a deployment has a forwarded credential waiting (tests and the deployment's answer never show more). */
export async function hasForwardedCredential(db: Db, deploymentId: string): Promise<boolean> {
  const [row] = await db.select({ n: sql<number>`1` }).from(jobCredentials).where(eq(jobCredentials.deploymentId, deploymentId));
  return row !== undefined;
}
