/**
 * The git source's SQL: linking (provider, owner, repository, branches), the push
 * hook and its encrypted secret, the webhook domain, the clone credentials a
 * remote listing uses, and the commit the project serves.
 */
import { and, eq } from "drizzle-orm";
import { randomBytes, toBase64Url } from "../../shared/crypto/encoding";
import type { Keyring } from "../../shared/crypto/keyring";
import { gitPushHooks, workspaceSettings } from "../../shared/db/schema";
import type { Db, Executor } from "../../shared/db/types";
import type { GitProvider } from "../../shared/git/hosts";
import { newId } from "../../shared/ids";
import { servingDeployment } from "./deployments-store";
import { findProject, updateProject, type ProjectRow } from "./store";

export type HookRow = typeof gitPushHooks.$inferSelect;

/** Where a hook's signing secret lives: the AES-GCM additional data (the push webhook decrypts with the same). */
export const hookSecretContext = (orgId: string, hookId: string) => ({ orgId, table: "git_push_hooks", column: "secret", rowId: hookId });

/** Where the project's clone token lives (as clone-token.ts writes it). */
const projectTokenContext = (p: { orgId: string; id: string }) => ({ orgId: p.orgId, table: "projects", column: "clone_token", rowId: p.id });
/** Where a user's Settings clone token lives (as settings/store.ts writes it). */
const settingsTokenContext = (orgId: string, userId: string) => ({ orgId, table: "workspace_settings", column: "clone_token", rowId: userId });

export interface LinkFields {
  provider: GitProvider;
  owner: string;
  repo: string;
  branch: string;
  defaultBranch: string | null;
}

/** Re-points the project at a repository checked on the host; everything else (auto-deploy, hook, tokens, webhook domain) stays. */
export function linkRepository(ex: Executor, orgId: string, id: string, link: LinkFields, now: Date): Promise<ProjectRow> {
  return updateProject(ex, orgId, id, {
    gitProvider: link.provider,
    gitOwner: link.owner,
    gitRepo: link.repo,
    gitBranch: link.branch,
    gitDefaultBranch: link.defaultBranch,
    gitLinkedAt: now,
    updatedAt: now,
  });
}

export function setDeployBranch(ex: Executor, orgId: string, id: string, branch: string, defaultBranch: string | null, now: Date): Promise<ProjectRow> {
  return updateProject(ex, orgId, id, { gitBranch: branch, gitDefaultBranch: defaultBranch, updatedAt: now });
}

export function setWebhookDomain(ex: Executor, orgId: string, id: string, domain: string | null, now: Date): Promise<ProjectRow> {
  return updateProject(ex, orgId, id, { webhookDomain: domain, updatedAt: now });
}

export async function findHook(ex: Executor, orgId: string, projectId: string): Promise<HookRow | undefined> {
  const [hook] = await ex
    .select()
    .from(gitPushHooks)
    .where(and(eq(gitPushHooks.projectId, projectId), eq(gitPushHooks.orgId, orgId)));
  return hook;
}

/** 32 random bytes, base64url: the signing secret git hosts sign pushes with. */
const newHookSecret = () => `whsec_${toBase64Url(randomBytes(32))}`;

/**
 * Turns auto-deploy on or off. On: the project's push hook is created with a
 * new secret when it has none; the plain secret comes back only then. Off keeps
 * the hook, so the URL pasted into the git host stays valid. The project row is
 * locked first: two concurrent first enables create one hook, and the loser
 * sees the winner's (without its secret).
 */
export async function setAutoDeploy(
  db: Db,
  keyring: Keyring,
  orgId: string,
  id: string,
  enabled: boolean,
  now: Date,
): Promise<{ project: ProjectRow; hook: HookRow | undefined; secret: string | null }> {
  // Encrypted before the transaction: no crypto while the row is locked.
  const hookId = newId("gph");
  const secret = enabled ? newHookSecret() : null;
  const ciphertext = secret ? await keyring.encrypt(secret, hookSecretContext(orgId, hookId)) : null;
  return db.transaction(async (tx) => {
    const project = await findProject(tx, orgId, id, "update");
    let hook = await findHook(tx, orgId, project.id);
    let created: string | null = null;
    if (!hook && ciphertext) {
      [hook] = await tx.insert(gitPushHooks).values({ id: hookId, orgId, projectId: project.id, secret: ciphertext, createdAt: now }).returning();
      created = secret;
    }
    const row = await updateProject(tx, orgId, project.id, { autoDeploy: enabled, updatedAt: now });
    return { project: row, hook, secret: created };
  });
}

/**
 * The clone token a remote listing sends: the project's own, else the caller's
 * Settings token when it is marked `asDefault`; null when neither. Decrypted
 * here and only handed to the git client (never returned or logged).
 */
export async function cloneTokenFor(db: Db, keyring: Keyring, project: ProjectRow, userId: string | null): Promise<string | null> {
  if (project.cloneTokenCiphertext) return keyring.decrypt(project.cloneTokenCiphertext, projectTokenContext(project));
  // Without a user (a push deployment) there is no personal default to fall back to.
  if (userId === null) return null;
  const [settings] = await db
    .select({ ciphertext: workspaceSettings.cloneTokenCiphertext, asDefault: workspaceSettings.cloneTokenAsDefault })
    .from(workspaceSettings)
    .where(and(eq(workspaceSettings.orgId, project.orgId), eq(workspaceSettings.userId, userId)));
  if (!settings?.ciphertext || !settings.asDefault) return null;
  return keyring.decrypt(settings.ciphertext, settingsTokenContext(project.orgId, userId));
}

/** The commit of the current ready production deployment, null before one. */
export async function deployedCommit(ex: Executor, projectId: string): Promise<string | null> {
  return (await servingDeployment(ex, projectId))?.commitSha ?? null;
}
