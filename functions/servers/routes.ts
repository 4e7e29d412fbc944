/**
 * Build servers: runner processes attached to the organization over HTTPS
 * (issue 22). Registering one mints its runner token (`wsr_…`), shown once;
 * the runner then reports itself through the runner protocol
 * (./runner-protocol.ts). Members list and read them; admins register,
 * change and delete them.
 */
import { z } from "@hono/zod-openapi";
import type { AppContext } from "../../shared/http/context";
import { badRequest, notFound } from "../../shared/http/errors";
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { TOO_MANY_REGISTRATIONS, takeRegistration } from "./limits";
import {
  CreatedServerSchema,
  CreateServerBody,
  DeletedServerSchema,
  MAX_SERVERS_PER_ORG,
  PatchServerBody,
  ServerSchema,
  type ServerView,
  statusOf,
} from "./schema";
import { emitNotificationEvent } from "../notifications/fanout";
import { createServer, deleteServer, findServer, listServers, runningOn, type ServerRow, type StoppedDeployment, updateServer } from "./store";
import type { Running } from "./schema";
import { publicUrlRefusal } from "./public-url-guard";
import { withAudit } from "../operations/audit/record";

const TAGS = ["Build servers"];
const ServerParam = z.object({ id: pathId("id", "The server id (`srv_…`)") });

const DELETE_DOC = [
  "Requires `org:admin`. Revokes the server's runner token at once (its next request is 401).",
  "A build it holds goes back to `queued` with no lease, recorded in its transitions, for another server to take.",
  "Each `ready` deployment it served (the current one, and older builds it kept for a rollback) becomes `failed` and no longer current, with a `failureReason` naming the deleted server: its app and build went with it (deployments have no `stopped` status); deploy again to run it elsewhere. The environment then has no current deployment until the next deploy or a promote.",
  "A Settings `defaultServerId` naming it is left as it was and points nowhere: a deploy that would go to that default stays `queued` with `waitingFor: server_deleted`, until another server is chosen (per deploy or in Settings).",
  "Each app that was running (a current deployment) is announced as a `service.crashed` notification. The answer lists the deployments requeued and stopped.",
].join(" ");

function view(row: ServerRow, running: Running[], now: Date): ServerView {
  return {
    id: row.id,
    name: row.name,
    labels: row.labels,
    publicUrl: row.publicUrl,
    status: statusOf(row, now),
    draining: row.draining,
    tokenPrefix: row.tokenPrefix,
    version: row.version,
    capacity: row.capacity,
    sandbox: row.sandbox,
    limits: row.limits,
    lastSeenAt: row.lastSeenAt?.toISOString() ?? null,
    running,
    createdBy: row.createdBy,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

async function viewOne(c: AppContext, row: ServerRow): Promise<ServerView> {
  const running = await runningOn(c.get("db"), row.orgId, [row.id]);
  return view(row, running.get(row.id) ?? [], c.get("clock")());
}

/**
 * A `service.crashed` event per app that was running on the deleted server (its environment's
 * current deployment), as the runner sends when it gives an app up. The deletion has happened:
 * an event that cannot be stored is logged, not answered as an error.
 */
async function announceStopped(c: AppContext, stopped: StoppedDeployment[]) {
  const { orgId, userId } = callerOf(c);
  let sends = 0;
  for (const d of stopped.filter((x) => x.wasCurrent)) {
    try {
      const result = await emitNotificationEvent(
        c.get("db"),
        {
          orgId,
          category: "service.crashed",
          title: "Service stopped: its build server was deleted",
          message: d.reason,
          projectId: d.projectId,
          data: { deploymentId: d.id, environmentId: d.environmentId },
          createdBy: userId,
        },
        c.get("clock")(),
      );
      sends += result.sends;
    } catch (error) {
      c.get("logger").error("server_deletion_event_failed", { requestId: c.get("requestId"), deploymentId: d.id, error: (error as Error).message });
    }
  }
  if (sends > 0) c.get("services").wakeDeliveries();
}

const create = defineRoute({
  method: "post",
  path: "/servers",
  tags: TAGS,
  summary: "Register a build server (its runner token is shown once)",
  description: `Requires \`org:admin\`. Answers the server with its runner token (\`wsr_…\`) in \`token\`: shown only here, stored as a SHA-256 hash, bound to this organization and this server. The token works on the runner protocol only (every other route answers it 403). At most ${MAX_SERVERS_PER_ORG} servers per organization (409 beyond). A new server is \`offline\` until its runner's first heartbeat.`,
  permission: "org:admin",
  bodyLimit: 16 * 1024,
  request: { body: jsonRequest(CreateServerBody) },
  responses: {
    201: jsonResponse(CreatedServerSchema, "The server; `token` is never shown again"),
    409: { description: "The organization has the most servers it may" },
    429: TOO_MANY_REGISTRATIONS,
  },
});

const list = defineRoute({
  method: "get",
  path: "/servers",
  tags: TAGS,
  summary: "List the organization's build servers",
  description:
    "Requires `settings:read` (every role holds it). Oldest first, with each server's status, what its runner reported and what it runs (`running`: for now the deployments whose runner id is the server's id). Never the token.",
  permission: "settings:read",
  request: { query: PageQuery },
  responses: { 200: jsonResponse(pageOf(ServerSchema, "ServerPage"), "Servers, oldest first") },
});

const get = defineRoute({
  method: "get",
  path: "/servers/{id}",
  tags: TAGS,
  summary: "Read a build server",
  description: "Requires `settings:read`. Another organization's server answers 404 like an unknown id.",
  permission: "settings:read",
  request: { params: ServerParam },
  responses: { 200: jsonResponse(ServerSchema, "The server") },
});

const patch = defineRoute({
  method: "patch",
  path: "/servers/{id}",
  tags: TAGS,
  summary: "Rename a build server, set its labels or public URL, drain it",
  description:
    "Requires `org:admin`. Only the fields sent change. `draining: true` makes it take no new work (what it builds and serves goes on; its status is `draining` while it reports); `false` takes work again.",
  permission: "org:admin",
  bodyLimit: 16 * 1024,
  request: { params: ServerParam, body: jsonRequest(PatchServerBody) },
  responses: { 200: jsonResponse(ServerSchema, "The server as changed") },
});

const remove = defineRoute({
  method: "delete",
  path: "/servers/{id}",
  tags: TAGS,
  summary: "Delete a build server and revoke its runner token",
  description: DELETE_DOC,
  permission: "org:admin",
  request: { params: ServerParam },
  responses: { 200: jsonResponse(DeletedServerSchema, "Deleted; what it held was handed back or stopped") },
});

/** A publicUrl the outbound guard refuses (a literal private address, a local name): 400 naming the field. */
function checkPublicUrl(c: AppContext, publicUrl: string | null | undefined) {
  if (!publicUrl) return;
  const refusal = publicUrlRefusal(publicUrl, c.get("config").outboundAllowPrivate ?? false);
  if (refusal) throw badRequest("publicUrl", `publicUrl is refused: ${refusal}`);
}

export const serversRouter = createRouter()
  .openapi(create, async (c) => {
    const body = c.req.valid("json");
    checkPublicUrl(c, body.publicUrl);
    const caller = callerOf(c);
    const now = c.get("clock")();
    await takeRegistration(c, caller.orgId, now);
    const { row, token } = await withAudit(
      c,
      (tx) => createServer(tx, c.get("keyring"), { orgId: caller.orgId, userId: caller.userId, ...body }, now),
      ({ row }) => ({ action: "server.registered", target: { kind: "server", id: row.id }, details: { name: row.name, labels: row.labels } }),
    );
    return c.json({ ...view(row, [], now), token }, 201);
  })
  .openapi(list, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const { orgId } = callerOf(c);
    const page = toPage(await listServers(c.get("db"), orgId, limit, cursor), limit, (s) => s.id);
    const running = await runningOn(
      c.get("db"),
      orgId,
      page.items.map((s) => s.id),
    );
    const now = c.get("clock")();
    return c.json({ items: page.items.map((s) => view(s, running.get(s.id) ?? [], now)), nextCursor: page.nextCursor }, 200);
  })
  .openapi(get, async (c) => {
    const row = await findServer(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    if (!row) throw notFound("Server");
    return c.json(await viewOne(c, row), 200);
  })
  .openapi(patch, async (c) => {
    const patch = c.req.valid("json");
    checkPublicUrl(c, patch.publicUrl);
    const row = await withAudit(
      c,
      (tx) => updateServer(tx, callerOf(c).orgId, c.req.valid("param").id, patch, c.get("clock")()),
      (updated) => (updated ? { action: "server.updated", target: { kind: "server", id: updated.id }, details: { fields: Object.keys(patch) } } : null),
    );
    if (!row) throw notFound("Server");
    return c.json(await viewOne(c, row), 200);
  })
  .openapi(remove, async (c) => {
    const { id } = c.req.valid("param");
    const result = await withAudit(
      c,
      (tx) => deleteServer(tx, callerOf(c).orgId, id, c.get("clock")()),
      (deleted) =>
        deleted
          ? { action: "server.deleted", target: { kind: "server", id }, details: { requeued: deleted.requeued.length, stopped: deleted.stopped.length } }
          : null,
    );
    if (!result) throw notFound("Server");
    if (result.requeued.length > 0) c.get("services").wakeRunner();
    await announceStopped(c, result.stopped);
    return c.json({ id, requeued: result.requeued, stopped: result.stopped.map((d) => d.id) }, 200);
  });
