/**
 * Writing the audit log (issue 24). A route calls `recordAudit(c, …)` once its
 * change is made; who acted and from where come from the request: the caller the
 * guard resolved (a console session is the `user`, a bearer token the `token`
 * with its id), the client address read as the sign-in limits read it. Inside a
 * transaction, pass its handle as `db` so the row commits or rolls back with the
 * change. Details must be small and secret-free: names of changed fields, a
 * role, a domain name, never a value of an environment variable or a token.
 */
import { auditLog } from "../../../shared/db/schema";
import type { Executor } from "../../../shared/db/types";
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
