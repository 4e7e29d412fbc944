/**
 * POST /api/git/hooks/:hookId — the push webhook git hosts call. Public: no
 * bearer token; the signature made with the hook's secret is the only
 * credential. In order:
 * 1. the raw body, read under 1 MiB (413 past it, declared or not);
 * 2. the hook: an unknown id is 404, after the same signature work a known hook
 *    costs, so timing says little about which ids exist;
 * 3. the sender (from its headers) and its signature over the exact bytes,
 *    in constant time: missing or bad is 401 and nothing is recorded;
 * 4. only then the JSON (bounded nesting; malformed: 400);
 * 5. the outcome, recorded once per delivery id: `ping` (200), `deploy_queued`
 *    (a push to the deploy branch with auto-deploy on: 202; the deployments
 *    module will queue it, until then the push and its commit are recorded and
 *    become the project's last push), `ignored` (anything else: 202). A
 *    redelivery answers the first delivery's outcome with `redelivery: true`.
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
import { sha256 } from "./signature";
import { findHookTarget, hookSecret, OUTCOMES, recordDelivery, type DeliveryRecord, type HookTarget } from "./store";

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
        "`deploy_queued`: a push to the deploy branch with auto-deploy on (a production deployment of its commit is queued); `ignored`: another branch, a tag, a deleted branch, another event, auto-deploy off, a disabled project or no deploy branch known; `ping`: a ping or test delivery",
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
    redelivery: z
      .boolean()
      .openapi({ description: "True when this delivery id was received before: nothing new was recorded and this is the first delivery's outcome" }),
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
    `Headers read — ${HEADERS_READ} The sender is recognized by these headers (Gitea/Forgejo first: they also send GitHub's). Without a delivery id header, the SHA-256 of the body is the delivery id.`,
    "A push to the project's deploy branch (`gitBranch`, else the repository's default branch) with auto-deploy on answers 202 `deploy_queued`, becomes the project's last push (commit, branch, time) and queues a production deployment pinned to the pushed commit (`deploymentId`; a redelivery queues nothing new and answers the first delivery's id). Other branches, tags, deleted branches, other events, auto-deploy off or a disabled project: 202 `ignored`, recorded too (the project's last push does not move). GitHub's `ping`, Gitea/Forgejo's Test Delivery and Bitbucket's `diagnostics:ping`: 200 `ping`. GitLab's Test button sends a sample push of the default branch, handled as a push.",
    "A delivery id already received for this hook (a redelivery, or two identical deliveries at once) records nothing new and answers the first delivery's outcome with `redelivery: true`.",
    `Bodies over ${formatBytes(MAX_DELIVERY_BYTES)}: 413, with or without Content-Length. JSON, or a form with the JSON in its \`payload\` field (GitHub's and Gitea's form content type).`,
  ].join("\n\n"),
  permission: "public",
  request: { params: HookIdParam },
  responses: {
    200: jsonResponse(PushDelivery, "A ping or test delivery (outcome `ping`)"),
    202: jsonResponse(PushDelivery, "Accepted: `deploy_queued` or `ignored`"),
    400: { description: "The body is not a JSON object (or nests too deeply), or a field the push is read from is malformed; `field` names it" },
    401: { description: "No host's signature header, or a signature that does not match the hook's secret; nothing is recorded" },
    404: { description: "No such push hook" },
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
  if (event === "ping") return { ...base, ref: null, branch: null, commit: null, outcome: "ping" };
  // A push may move several refs (Bitbucket): the deploy branch's change decides.
  const change = changes.find((c) => hook.deployBranch !== null && branchOf(c.ref) === hook.deployBranch) ?? changes[0];
  const ref = change?.ref ?? null;
  const branch = branchOf(ref);
  const commit = change?.commit ?? null;
  const deploys = event === "push" && hook.autoDeploy && !hook.disabled && branch !== null && branch === hook.deployBranch && commit !== null;
  return { ...base, ref, branch, commit, outcome: deploys ? "deploy_queued" : "ignored" };
}

async function deliveryIdOf(sender: Sender, body: Uint8Array<ArrayBuffer>): Promise<string> {
  const { header, value } = sender.delivery;
  if (value === null) return `sha256:${[...(await sha256(body))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
  if (!DELIVERY_ID.test(value)) throw new ApiError("validation", `${header} must be 1-200 printable characters`, { field: header });
  return value;
}

export const pushRouter = createRouter().openapi(route, async (c) => {
  const { hookId } = c.req.valid("param");
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

  const payload = parsePayload(body.text, c.req.header("content-type"));
  const { event, changes } = readHostEvent(sender, payload);
  const deliveryId = await deliveryIdOf(sender, body.bytes);
  const decided = decide(hook, sender, event, changes);
  const { record, redelivery } = await recordDelivery(db, c.get("keyring"), hook, deliveryId, decided, c.get("clock")());
  if (!redelivery) {
    c.get("logger").info("git push delivery", {
      requestId: c.get("requestId"),
      hookId,
      projectId: hook.projectId,
      provider: record.provider,
      event: record.event,
      outcome: record.outcome,
    });
  }
  if (!redelivery && record.deploymentId) c.get("wakeRunner")();
  const answer = { ...record, deploymentId: record.deploymentId ?? null, redelivery };
  return record.outcome === "ping" ? c.json(answer, 200) : c.json(answer, 202);
});
