/**
 * Who sent a push webhook, whether its signature holds, and what it says.
 *
 * The headers and payloads each host sends, as documented by the hosts:
 * - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`, `X-GitHub-Event`
 *   (`push`, `ping`), `X-GitHub-Delivery` (a GUID kept by "Redeliver"); push: `ref`, `after`,
 *   `deleted` (docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries,
 *   docs.github.com/webhooks/webhook-events-and-payloads#push).
 * - GitLab: `X-Gitlab-Token: <the secret token itself>`, `X-Gitlab-Event` (`Push Hook`,
 *   `Tag Push Hook`; `System Hook` with `object_kind` on instance hooks), `Idempotency-Key`
 *   (GitLab 17.4+, the same on every retry of one event) else `X-Gitlab-Event-UUID`; push:
 *   `object_kind`, `ref`, `after` (docs.gitlab.com/user/project/integrations/webhooks,
 *   gitlab.com/gitlab-org/gitlab/-/issues/388692). Its "Test > Push events" button sends a sample
 *   push of the default branch's recent commits that nothing tells apart from a real push.
 * - Gitea / Forgejo: `X-Gitea-Signature` / `X-Forgejo-Signature: <hex HMAC-SHA256 of the raw
 *   body>`, `X-Gitea-Event` / `X-Forgejo-Event` (`push`, …), `X-Gitea-Delivery` /
 *   `X-Forgejo-Delivery`. They also send GitHub's and Gogs' event headers, so they are recognized
 *   first. Push: `ref`, `before`, `after`; the "Test Delivery" button sends a push of the default
 *   branch's head with `before` equal to `after`, which no real push has
 *   (docs.gitea.com/usage/webhooks, forgejo.org/docs/latest/user/webhooks).
 * - Bitbucket Cloud: `X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>` (webhook secrets,
 *   2023; sha256, unlike GitHub's legacy sha1 header of the same name), `X-Event-Key` (`repo:push`),
 *   `X-Request-UUID` (one per request; `X-Hook-UUID` names the webhook, the same on every delivery,
 *   so it is no delivery id); push: `push.changes[].new` `{type: branch|tag, name, target.hash}`,
 *   `new: null` for a deleted ref (support.atlassian.com/bitbucket-cloud/docs/event-payloads).
 *   Bitbucket Data Center sends `X-Request-Id` and, on "Test connection", `diagnostics:ping`.
 */
import { badRequest } from "../../shared/http/errors";
import { isUnsafeText } from "../../shared/http/safe-text";
import { verifyHmacHex, verifyToken } from "./signature";

export const PROVIDERS = ["github", "gitlab", "gitea", "bitbucket"] as const;
export type Provider = (typeof PROVIDERS)[number];

/** A delivery's sender as its headers name it; the signature is checked by `verify`. */
export interface Sender {
  provider: Provider;
  /** The event header's value (`push`, `Push Hook`, `repo:push`), null when absent. */
  hostEvent: string | null;
  /** The header naming the event, for error messages. */
  eventHeader: string;
  /** The provider's delivery id header and value (null: none sent). */
  delivery: { header: string; value: string | null };
  verify(secret: string, body: Uint8Array<ArrayBuffer>): Promise<boolean>;
}

const header = (headers: Headers, name: string) => headers.get(name);
const withoutPrefix = (value: string | null, prefix: string) => (value?.startsWith(prefix) ? value.slice(prefix.length) : null);

/** The first delivery header present, or the last name with null. */
function firstHeader(headers: Headers, names: string[]) {
  for (const name of names) {
    const value = header(headers, name);
    if (value !== null) return { header: name, value };
  }
  return { header: names[0]!, value: null };
}

/**
 * The sender, from the headers only a given host sends (event or signature).
 * Gitea and Forgejo come first: they also send `X-GitHub-Event` and `X-Hub-Signature-256`.
 * null: no host recognized (answered like a missing signature).
 */
export function identifySender(headers: Headers): Sender | null {
  const has = (...names: string[]) => names.some((n) => headers.has(n));
  if (has("x-forgejo-event", "x-forgejo-signature", "x-gitea-event", "x-gitea-signature")) {
    const forgejo = has("x-forgejo-event", "x-forgejo-signature");
    const signature = header(headers, "x-forgejo-signature") ?? header(headers, "x-gitea-signature");
    return {
      provider: "gitea",
      hostEvent: forgejo ? (header(headers, "x-forgejo-event") ?? header(headers, "x-gitea-event")) : header(headers, "x-gitea-event"),
      eventHeader: forgejo ? "X-Forgejo-Event" : "X-Gitea-Event",
      delivery: firstHeader(headers, forgejo ? ["X-Forgejo-Delivery", "X-Gitea-Delivery"] : ["X-Gitea-Delivery"]),
      verify: (secret, body) => verifyHmacHex(secret, body, signature),
    };
  }
  if (has("x-gitlab-event", "x-gitlab-token")) {
    const token = header(headers, "x-gitlab-token");
    return {
      provider: "gitlab",
      hostEvent: header(headers, "x-gitlab-event"),
      eventHeader: "X-Gitlab-Event",
      delivery: firstHeader(headers, ["Idempotency-Key", "X-Gitlab-Event-UUID"]),
      verify: (secret) => verifyToken(secret, token),
    };
  }
  if (has("x-github-event", "x-hub-signature-256")) {
    const signature = withoutPrefix(header(headers, "x-hub-signature-256"), "sha256=");
    return {
      provider: "github",
      hostEvent: header(headers, "x-github-event"),
      eventHeader: "X-GitHub-Event",
      delivery: firstHeader(headers, ["X-GitHub-Delivery"]),
      verify: (secret, body) => verifyHmacHex(secret, body, signature),
    };
  }
  if (has("x-event-key", "x-hub-signature")) {
    const signature = withoutPrefix(header(headers, "x-hub-signature"), "sha256=");
    return {
      provider: "bitbucket",
      hostEvent: header(headers, "x-event-key"),
      eventHeader: "X-Event-Key",
      delivery: firstHeader(headers, ["X-Request-UUID", "X-Request-Id"]),
      verify: (secret, body) => verifyHmacHex(secret, body, signature),
    };
  }
  return null;
}

/** One ref a push moved: `commit` null when the push deleted it. */
export interface RefChange {
  ref: string;
  commit: string | null;
}

/** What a verified delivery says: `push` (with its ref changes), `ping`, or another event (ignored). */
export interface HostEvent {
  event: string;
  changes: RefChange[];
}

type Json = Record<string, unknown>;

const MAX_REF = 1024;
const COMMIT = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const ZERO = /^0+$/;
const EVENT_NAME = /^[\x20-\x7e]{1,100}$/;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function refAt(value: unknown, field: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_REF || isUnsafeText(value)) {
    throw badRequest(field, `${field} must be a git ref name of at most ${MAX_REF} characters`);
  }
  return value;
}

/** A commit id (SHA-1 or SHA-256 hex), or null for the all-zero id of a deleted ref. */
function commitAt(value: unknown, field: string): string | null {
  if (typeof value !== "string" || !(COMMIT.test(value) || (ZERO.test(value) && value.length <= 64))) {
    throw badRequest(field, `${field} must be a commit id (40 or 64 lowercase hex digits)`);
  }
  return ZERO.test(value) ? null : value;
}

/** `after` of GitHub, GitLab and Gitea pushes; `deleted: true` (GitHub) also means no commit. */
function singleChange(payload: Json): RefChange[] {
  const ref = refAt(payload.ref, "ref");
  const commit = commitAt(payload.after, "after");
  return [{ ref, commit: payload.deleted === true ? null : commit }];
}

function bitbucketChanges(payload: Json): RefChange[] {
  const changes = isObject(payload.push) ? payload.push.changes : undefined;
  if (!Array.isArray(changes)) throw badRequest("push.changes", "push.changes must be an array");
  return changes.map((change, i) => {
    const at = `push.changes.${i}`;
    if (!isObject(change)) throw badRequest(at, `${at} must be an object`);
    const side = isObject(change.new) ? change.new : isObject(change.old) ? change.old : null;
    const which = isObject(change.new) ? "new" : "old";
    if (!side) throw badRequest(`${at}.new`, `${at}.new must be an object`);
    const prefix = side.type === "branch" ? "refs/heads/" : side.type === "tag" ? "refs/tags/" : null;
    if (!prefix) throw badRequest(`${at}.${which}.type`, `${at}.${which}.type must be branch or tag`);
    const ref = prefix + refAt(side.name, `${at}.${which}.name`);
    if (which === "old") return { ref, commit: null };
    const target = isObject(side.target) ? side.target.hash : undefined;
    return { ref, commit: commitAt(target, `${at}.new.target.hash`) };
  });
}

/** The event a verified payload carries, normalized across hosts. */
export function readHostEvent(sender: Sender, payload: Json): HostEvent {
  const name = sender.hostEvent ?? "unknown";
  if (!EVENT_NAME.test(name)) throw badRequest(sender.eventHeader, `${sender.eventHeader} must be 1-100 printable characters`);
  const other = { event: name, changes: [] };
  switch (sender.provider) {
    case "github":
      if (name === "ping") return { event: "ping", changes: [] };
      return name === "push" ? { event: "push", changes: singleChange(payload) } : other;
    case "gitlab": {
      const push =
        name === "Push Hook" || name === "Tag Push Hook" || (name === "System Hook" && (payload.object_kind === "push" || payload.object_kind === "tag_push"));
      return push ? { event: "push", changes: singleChange(payload) } : other;
    }
    case "gitea": {
      if (name !== "push") return other;
      const changes = singleChange(payload);
      // The "Test Delivery" button: a push that moves nothing.
      if (typeof payload.before === "string" && payload.before === payload.after && changes[0]!.commit !== null) return { event: "ping", changes: [] };
      return { event: "push", changes };
    }
    case "bitbucket":
      if (name === "diagnostics:ping") return { event: "ping", changes: [] };
      return name === "repo:push" ? { event: "push", changes: bitbucketChanges(payload) } : other;
  }
}
