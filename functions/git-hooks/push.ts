/**
 * POST /api/git/hooks/:hookId — the push webhook git hosts call. Public: no
 * bearer token; the signature made with the hook's secret is the only
 * credential. In order:
 * 1. the raw body, read under 1 MiB (413 past it, declared or not);
 * 2. the hook: an unknown id is 404, after the same signature work a known hook
 *    costs, so timing says little about which ids exist;
 * 3. the sender (from its headers) and its signature over the exact bytes,
 *    in constant time: missing or bad is 401 and nothing is recorded; so is a
 *    sender that is not the project's provider (one secret, one scheme);
 * 4. only then the JSON (bounded nesting; malformed: 400);
 * 5. a body already received for the project (a replay, whatever its unsigned
 *    delivery id) answers the first outcome with `redelivery: true`;
 * 6. a push to deploy is checked against the host: not the branch head now, or
 *    already deployed, is `stale` (202, nothing queued);
 * 7. the outcome, recorded once per body: `ping` (200), `deploy_queued` (202,
 *    a production deployment of the commit queued, the project's last push
 *    moved), `ignored` or `stale` (202).
 */
import { createRoute, z } from "@hono/zod-openapi";
import { ApiError, notFound } from "../../shared/http/errors";
import { formatBytes } from "../../shared/http/json-body";
import { problem } from "../../shared/http/problem-schema";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { pathId } from "../../shared/http/params";
import { MAX_DELIVERY_BYTES, parsePayload, readRawBody } from "./payload";
import { identifySender, PROVIDERS, readHostEvent, type RefChange, type Sender } from "./providers";
import { staleReason } from "./branch-head";
import { sha256 } from "./signature";
import { placementFor } from "../deployments/placement-store";
import { findDelivery, findHookTarget, hookSecret, OUTCOMES, recordDelivery, type DeliveryRecord, type HookTarget } from "./store";
import { recordAudit } from "../operations/audit/record";

/** Longer ids name no hook: answered 404 without a query. */
const MAX_HOOK_ID = 128;
const DELIVERY_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * Stands in for a secret when there is no hook, so an unknown id costs the same HMAC.
 * Made on first use: workerd refuses random values in a module's global scope (the Worker would not start).
 */
let noHookSecret: string | undefined;
const noHookSecretValue = () => (noHookSecret ??= `none-${crypto.randomUUID()}`);

const hookNotFound = () => notFound("Push hook");

/** The answer to a delivery (200 and 202). */
export const PushDelivery = z
  .object({
    outcome: z.enum(OUTCOMES).openapi({
      description:
        "`deploy_queued`: a push to the deploy branch with auto-deploy on (a production deployment of its commit is queued); `stale`: such a push whose commit is not the branch head on the host now, or is already the current production deployment (nothing queued; `reason` says which); `ignored`: another branch, a tag, a deleted branch, another event, auto-deploy off, a disabled project or no deploy branch known; `ping`: a ping or test delivery",
    }),
    provider: z.enum(PROVIDERS),
    event: z.string().openapi({ description: "`push`, `ping`, or the host's own name of another event" }),
    ref: z.string().nullable().openapi({ description: "The ref the push moved (`refs/heads/main`, `refs/tags/v1`)" }),
    branch: z.string().nullable().openapi({ description: "The branch, for a push to a branch" }),
    commit: z.string().nullable().openapi({ description: "The commit the ref now points at (null: deleted, or not a push)" }),
    deploymentId: z
      .string()
      .nullable()
      .openapi({ description: "`deploy_queued`: the production deployment queued for the pushed commit (GET /api/deployments/{id}); null otherwise" }),
    reason: z.string().nullable().openapi({ description: "Why nothing was queued: a replay, or a `stale` push; null otherwise" }),
    redelivery: z.boolean().openapi({
      description:
        "True when this exact body was received before for the project (a redelivery or a replay, whatever its delivery id): nothing new was recorded or queued and this is the first delivery's outcome",
    }),
  })
  .openapi("GitPushDelivery");

const HookIdParam = z.object({ hookId: pathId("hookId", "The hook id from the project's `webhookUrl` (`gph_…`)") });

const HEADERS_READ = [
  "GitHub: `X-Hub-Signature-256` (`sha256=<hex HMAC-SHA256 of the body>`), `X-GitHub-Event`, `X-GitHub-Delivery`.",
  "GitLab: `X-Gitlab-Token` (the secret itself), `X-Gitlab-Event`, `Idempotency-Key` else `X-Gitlab-Event-UUID`.",
  "Gitea / Forgejo: `X-Gitea-Signature` / `X-Forgejo-Signature` (hex HMAC-SHA256 of the body), `X-Gitea-Event` / `X-Forgejo-Event`, `X-Gitea-Delivery` / `X-Forgejo-Delivery`.",
  "Bitbucket: `X-Hub-Signature` (`sha256=<hex>`), `X-Event-Key`, `X-Request-UUID` (Data Center: `X-Request-Id`).",
].join(" ");

const defined = defineRoute({
  method: "post",
  path: "/git/hooks/{hookId}",
  tags: ["Projects"],
  summary: "Receive a git host's push webhook",
  description: [
    "Called by GitHub, GitLab, Gitea/Forgejo and Bitbucket, not by API clients: no bearer token, the signature made with the hook's secret (shown once by `POST /api/projects/{id}/auto-deploy`) is the only credential, checked in constant time over the exact body bytes before it is parsed.",
    `Headers read — ${HEADERS_READ} The sender is recognized by these headers (Gitea/Forgejo first: they also send GitHub's). A hook accepts only its project's provider's scheme (another host's headers: 401). The delivery id is kept for support only: it is not signed.`,
    "A push to the project's deploy branch (`gitBranch`, else the repository's default branch) with auto-deploy on answers 202 `deploy_queued`, becomes the project's last push (commit, branch, time) and queues a production deployment pinned to the pushed commit (`deploymentId`), once the host shows that commit as the branch's head: an older or superseded push, or the commit already deployed, answers 202 `stale` with the `reason` and queues nothing; a host that cannot be read answers 502 (unreachable) or 409 and records nothing. Other branches, tags, deleted branches, other events, auto-deploy off or a disabled project: 202 `ignored`, recorded too (the project's last push does not move). GitHub's `ping`, Gitea/Forgejo's Test Delivery and Bitbucket's `diagnostics:ping`: 200 `ping`. GitLab's Test button sends a sample push of the default branch, handled as a push.",
    "A body already received for this project (a redelivery, a replay with another or no delivery id, or two identical deliveries at once) records and queues nothing new and answers the first delivery's outcome and status with `redelivery: true` and a `reason`. Bodies are remembered 30 days; past that a replay still meets the branch-head check.",
    `Bodies over ${formatBytes(MAX_DELIVERY_BYTES)}: 413, with or without Content-Length. JSON, or a form with the JSON in its \`payload\` field (GitHub's and Gitea's form content type).`,
  ].join("\n\n"),
  permission: "public",
  request: { params: HookIdParam },
  responses: {
    200: jsonResponse(PushDelivery, "A ping or test delivery (outcome `ping`)"),
    202: jsonResponse(PushDelivery, "Accepted: `deploy_queued` or `ignored`"),
    400: { description: "The body is not a JSON object (or nests too deeply), or a field the push is read from is malformed; `field` names it" },
    401: {
      description:
        "No host's signature header, a signature that does not match the hook's secret, or another provider's scheme than the project's; nothing is recorded",
    },
    404: { description: "No such push hook" },
    409: { description: "The linked repository cannot be read now (or its clone token cannot be decrypted); nothing is recorded" },
    502: { description: "The git host is unreachable; nothing is recorded (a redelivery is judged afresh)" },
    413: problem(`The body is larger than ${formatBytes(MAX_DELIVERY_BYTES)}; nothing is recorded`),
  },
});

/** The body is documented without the strict JSON middleware: the handler reads the raw bytes itself. */
const route = createRoute({
  ...defined,
  "x-body-limit": MAX_DELIVERY_BYTES,
  request: {
    ...defined.request,
    body: {
      required: true,
      description: "The host's event payload as it sends it (push, ping, …); read loosely: only the ref and commit fields of a push",
      content: {
        // Plain schemas, not zod: zod-openapi would attach a validator that reads the body before the signature check.
        "application/json": {
          schema: { type: "object" as const, description: "A GitHub, GitLab, Gitea/Forgejo or Bitbucket webhook payload", additionalProperties: true },
        },
        "application/x-www-form-urlencoded": {
          schema: { type: "object" as const, properties: { payload: { type: "string" as const, description: "The JSON payload" } }, required: ["payload"] },
        },
      },
    },
  },
});

const branchOf = (ref: string | null) => (ref?.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : null);

/** The outcome of a verified event for this hook's project. */
function decide(hook: HookTarget, sender: Sender, event: string, changes: RefChange[]): DeliveryRecord {
  const base = { provider: sender.provider, event };
  if (event === "ping") return { ...base, ref: null, branch: null, commit: null, outcome: "ping", reason: null };
  // A push may move several refs (Bitbucket): the deploy branch's change decides.
  const change = changes.find((c) => hook.deployBranch !== null && branchOf(c.ref) === hook.deployBranch) ?? changes[0];
  const ref = change?.ref ?? null;
  const branch = branchOf(ref);
  const commit = change?.commit ?? null;
  const deploys = event === "push" && hook.autoDeploy && !hook.disabled && branch !== null && branch === hook.deployBranch && commit !== null;
  return { ...base, ref, branch, commit, outcome: deploys ? "deploy_queued" : "ignored", reason: null };
}

const bodyDigestOf = async (body: Uint8Array<ArrayBuffer>) => `sha256:${[...(await sha256(body))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;

function deliveryIdOf(sender: Sender): string | null {
  const { header, value } = sender.delivery;
  if (value !== null && !DELIVERY_ID.test(value)) throw new ApiError("validation", `${header} must be 1-200 printable characters`, { field: header });
  return value;
}

const REPLAY = "A replay: this body was received before for this project, so nothing new was recorded or queued (the first delivery's outcome)";

/** The answer: a replay repeats the first delivery's outcome and status. */
function answerOf(record: DeliveryRecord, replay: boolean) {
  return { ...record, deploymentId: record.deploymentId ?? null, reason: replay ? REPLAY : record.reason, redelivery: replay };
}

export const pushRouter = createRouter().openapi(route, async (c) => {
  const { hookId } = c.req.valid("param");
  const respond = (answer: ReturnType<typeof answerOf>) => (answer.outcome === "ping" ? c.json(answer, 200) : c.json(answer, 202));
  const body = await readRawBody(c.req.raw);
  const db = c.get("db");
  const hook = hookId.length > 0 && hookId.length <= MAX_HOOK_ID ? await findHookTarget(db, hookId) : undefined;
  const sender = identifySender(c.req.raw.headers);
  if (!hook) {
    if (sender) await sender.verify(noHookSecretValue(), body.bytes);
    throw hookNotFound();
  }
  if (!sender) throw new ApiError("unauthorized", "No signature: send the delivery from a git host webhook with the hook's secret");
  const secret = await hookSecret(c.get("keyring"), hook);
  const valid = await sender.verify(secret ?? noHookSecretValue(), body.bytes);
  if (!valid || secret === null) throw new ApiError("unauthorized", "The signature does not match this hook's secret");
  // One secret, one scheme: a GitLab token or a GitHub-style signature on a Gitea project is refused, so a leaked secret works in one format only.
  if (sender.provider !== hook.project.gitProvider) {
    throw new ApiError(
      "unauthorized",
      `This hook accepts only its project's provider's signature (${hook.project.gitProvider ?? "none linked"}), not ${sender.provider}'s`,
    );
  }

  const payload = parsePayload(body.text, c.req.header("content-type"));
  const { event, changes } = readHostEvent(sender, payload);
  const key = { bodyDigest: await bodyDigestOf(body.bytes), deliveryId: deliveryIdOf(sender) };
  const seen = await findDelivery(db, hook.projectId, key.bodyDigest);
  if (seen) return respond(answerOf(seen, true));
  let decided = decide(hook, sender, event, changes);
  if (decided.outcome === "deploy_queued") {
    const reason = await staleReason(c, hook.project, decided.branch!, decided.commit!);
    if (reason !== null) decided = { ...decided, outcome: "stale", reason };
  }
  // A push has no user, so no Settings: it is placed by the defaults (placement.ts: `auto`).
  const placed = decided.outcome === "deploy_queued" ? await placementFor(c, hook.orgId, null) : undefined;
  const { record, replay } = await recordDelivery(db, c.get("keyring"), hook, key, decided, c.get("clock")(), placed);
  if (!replay) {
    c.get("logger").info("git push delivery", {
      requestId: c.get("requestId"),
      hookId,
      projectId: hook.projectId,
      provider: record.provider,
      event: record.event,
      outcome: record.outcome,
      ...(record.reason ? { reason: record.reason } : {}),
    });
  }
  if (!replay && record.deploymentId) {
    c.get("services").wakeRunner();
    // No caller: a push is the system's doing, on the project's organization.
    await recordAudit(c, {
      orgId: hook.orgId,
      action: "deployment.created",
      target: { kind: "deployment", id: record.deploymentId },
      details: { projectId: hook.projectId, trigger: "push", commit: record.commit ?? null },
    });
  }
  return respond(answerOf(record, replay));
});
