/**
 * Writing the audit log (issue 24). A route calls `recordAudit(c, …)` once its
 * change is made; who acted and from where come from the request: the caller the
 * guard resolved (a console session is the `user`, a bearer token the `token`
 * with its id), the client address read as the sign-in limits read it.
 * `withAudit(c, change, entry)` runs a change and its row in one transaction, so
 * both commit or neither does; inside a transaction of its own, a route passes
 * the handle as `db`. Changes that span several transactions or outside calls
 * (project deletion, env merges that yield between chunks, deployment queueing,
 * transfers) record their row once the change is made. Details must be small and secret-free: names of changed fields, a
 * role, a domain name, never a value of an environment variable or a token.
 */
import { auditLog } from "../../../shared/db/schema";
import type { Db, Executor } from "../../../shared/db/types";
import { currentSessionId } from "../../../shared/auth/session";
import type { AppContext } from "../../../shared/http/context";
import { newId } from "../../../shared/ids";
import { peerOf } from "../../auth/client-address";

export type AuditActorKind = "user" | "token" | "system";

export interface AuditEntry {
  /** A dotted verb: `token.created`, `member.removed`, `env.changed`, … (AUDIT_ACTIONS lists them). */
  action: AuditAction;
  target: { kind: string; id?: string | null };
  details?: Record<string, unknown>;
  /** The transaction of the change, when there is one. */
  db?: Executor;
  /** The organization the row belongs to; default the caller's active one (a route under /orgs/{orgId} acts on that one). */
  orgId?: string;
}

/** Every action the service records; the API's `action` filter takes these. */
export const AUDIT_ACTIONS = [
  "token.created",
  "token.revoked",
  "member.invited",
  "invitation.revoked",
  "member.removed",
  "member.role_changed",
  "settings.changed",
  "clone_token.changed",
  "env.changed",
  "project.created",
  "project.deleted",
  "project.transferred",
  "deployment.created",
  "deployment.promoted",
  "deployment.canceled",
  "domain.added",
  "domain.removed",
  "route_rules.changed",
  "channel.created",
  "channel.updated",
  "channel.deleted",
  "server.registered",
  "server.updated",
  "server.deleted",
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * Appends one row for the request's caller. Without an organization (a token
 * minted by a user who belongs to none) there is nobody to show it to, so
 * nothing is written.
 */
export async function recordAudit(c: AppContext, entry: AuditEntry): Promise<void> {
  const caller = c.get("caller");
  const orgId = entry.orgId ?? caller?.orgId;
  if (!orgId) return;
  const session = caller ? currentSessionId(c) : undefined;
  const actorKind: AuditActorKind = !caller ? "system" : session !== undefined ? "user" : "token";
  await (entry.db ?? c.get("db")).insert(auditLog).values({
    id: newId("aud", c.get("clock")().getTime()),
    orgId,
    actorKind,
    actorUserId: caller?.userId ?? null,
    actorTokenId: actorKind === "token" ? caller!.tokenId : null,
    action: entry.action,
    targetKind: entry.target.kind,
    targetId: entry.target.id ?? null,
    clientAddress: caller ? (peerOf(c) ?? null) : null,
    details: entry.details ?? null,
    createdAt: c.get("clock")(),
  });
}

/**
 * Makes `change` and its audit row one transaction: both commit or neither does.
 * `change` gets the transaction as its database (a store that opens a transaction
 * of its own gets a savepoint inside this one). `entry` describes the row from
 * the change's result; null writes none (nothing changed).
 */
export async function withAudit<T>(c: AppContext, change: (tx: Db) => Promise<T>, entry: (result: T) => Omit<AuditEntry, "db"> | null): Promise<T> {
  return c.get("db").transaction(async (tx) => {
    const result = await change(tx);
    const row = entry(result);
    if (row) await recordAudit(c, { ...row, db: tx });
    return result;
  });
}

/** A row the system writes on its own (no request): a sweep, a scheduled job. */
export async function recordSystemAudit(db: Executor, orgId: string, entry: Omit<AuditEntry, "db" | "orgId">, now = new Date()): Promise<void> {
  await db.insert(auditLog).values({
    id: newId("aud", now.getTime()),
    orgId,
    actorKind: "system",
    actorUserId: null,
    actorTokenId: null,
    action: entry.action,
    targetKind: entry.target.kind,
    targetId: entry.target.id ?? null,
    clientAddress: null,
    details: entry.details ?? null,
    createdAt: now,
  });
}
