/**
 * The Worker's edge (issue 22, item 5): on the cloud every app runs on a build
 * server, and requests for it reach the Worker first. A request whose Host is a
 * project's free route (`<slug>.<SHARED_DOMAIN>`), a preview's
 * (`<slug>--<environment>.<SHARED_DOMAIN>`) or a connected domain is taken here,
 * never by the API; every other Host is the API's (`API_HOSTS`, when set, names
 * the API's hosts: then any other Host is an app's, or this edge's 404, and no
 * database read decides it).
 *
 * Per request, as the self-hosted edge (functions/self-hosted/edge/edge.ts) does:
 * the target read from the database (no route table in a Worker); a target over
 * MAX_TARGET → 414; disabled project → 503; route rules on the normalized path
 * (rules.ts, request-path.ts: the same code) → 403/429; nothing deployed → 404; a
 * crashed deployment → 502; a sleeping one is woken and the request held until
 * its server reports it listening (else 503 with Retry-After); then forwarded
 * with fetch to the server's public URL, the body streamed both ways (never
 * buffered), with the original Host, client address (`CF-Connecting-IP`) and
 * deployment in signed headers (shared/net/edge-forward.ts); a client's own
 * copies of those headers are dropped. The server's edge serves only such
 * requests. Route rules and the request log apply here, where the request is
 * first received: one `request` log line per request, as the self-hosted edge
 * writes it (request-log.ts), with the bytes relayed once the answer ends.
 */
import type { Keyring } from "../shared/crypto/keyring";
import type { Db } from "../shared/db/types";
import type { Logger } from "../shared/http/logger";
import { parseAddress } from "../shared/net/cidr";
import { FORWARD_HEADER_NAMES, signForward } from "../shared/net/edge-forward";
import { appendRequestLines } from "./logs/request-batches";
import { takeRateLimits } from "./notifications/rate-limit";
import { type EdgeReason, pageOf } from "./self-hosted/edge/pages";
import { requestLogLine } from "./self-hosted/edge/request-log";
import { requestPath } from "./self-hosted/edge/request-path";
import { hostnameOf } from "./self-hosted/edge/route-table";
import { evaluateRules } from "./self-hosted/edge/rules";
import { type EdgeTarget, loadTargetOfHost, touchDeployments, wakeDeployment } from "./self-hosted/edge/store";
import { forwardTarget } from "./servers/forward-target";
import { publicUrlRefusal } from "./servers/public-url-guard";

export interface WorkerEdgeDeps {
  db: Db;
  keyring: Keyring;
  sharedDomain: string;
  /** API_HOSTS: the hosts the API answers; empty: the API answers every Host that is not an app's. */
  apiHosts: string[];
  /** How long a request waits for a deployment that is not listening yet. */
  holdMs: number;
  /**
   * OUTBOUND_ALLOW_PRIVATE: a server's public URL may be a loopback or private literal address.
   * A Worker cannot resolve names: a name is left to Cloudflare's network, which does not
   * route to private addresses; literal addresses and local names are checked here.
   */
  allowPrivate: boolean;
  logger: Logger;
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) and the ones this edge sets itself; never forwarded. `Upgrade` is
 * kept: `Upgrade: websocket` is what makes the runtime's fetch open a WebSocket to the server.
 */
const DROPPED = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "host",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
  "forwarded",
  ...FORWARD_HEADER_NAMES,
]);
const HOLD_POLL_MS = 250;

/** The app target of this request; "api" when the API answers it. */
export async function edgeTargetOf(request: Request, deps: Pick<WorkerEdgeDeps, "db" | "sharedDomain" | "apiHosts">): Promise<EdgeTarget | "api" | "unknown"> {
  const host = hostnameOf(request.headers.get("host") ?? new URL(request.url).host);
  if (!host || deps.apiHosts.includes(host)) return "api";
  const underShared = host.endsWith(`.${deps.sharedDomain}`);
  // Without API_HOSTS, a Host that is neither under the shared domain nor a connected domain is the API's.
  // The lookup failing (the database unreachable) leaves the request to the API, which answers what it can without it.
  if (!underShared && deps.apiHosts.length === 0) return (await loadTargetOfHost(deps.db, deps.sharedDomain, host).catch(() => undefined)) ?? "api";
  return (await loadTargetOfHost(deps.db, deps.sharedDomain, host)) ?? "unknown";
}

function page(reason: EdgeReason, headers: Record<string, string> = {}): Response {
  const { status, html } = pageOf(reason);
  return new Response(html, {
    status,
    headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", "x-workspace-edge": reason, ...headers },
  });
}

/** Serves an app's request (the target from edgeTargetOf); logs it once its answer has ended. */
export async function serveAppRequest(request: Request, target: EdgeTarget | "unknown", deps: WorkerEdgeDeps): Promise<Response> {
  if (target === "unknown") return page("unknown_host");
  const started = performance.now();
  const url = new URL(request.url);
  const parsed = requestPath(url.pathname + url.search);
  const clientText = request.headers.get("cf-connecting-ip") ?? "unknown";
  const client = { text: clientText, address: parseAddress(clientText) };
  const host = request.headers.get("host") ?? url.host;
  const log = (status: number, bytes: number, ruleId: string | null, forTarget = target) =>
    appendRequestLines(deps.db, [
      requestLogLine(forTarget, {
        method: request.method,
        host,
        path: parsed?.path ?? "/",
        client: clientText,
        status,
        durationMs: Math.round(performance.now() - started),
        bytes,
        ruleId,
        at: new Date(),
      }),
    ]).catch((error) => deps.logger.error("edge_log_failed", { error: (error as Error).message }));
  const stop = async (reason: EdgeReason, ruleId: string | null = null, headers: Record<string, string> = {}) => {
    const answer = page(reason, headers);
    await log(answer.status, 0, ruleId);
    return answer;
  };

  if (!parsed) return stop("too_long");
  if (target.disabled) return stop("disabled");
  const take = async (key: string, max: number, windowMs: number) => {
    const g = (await takeRateLimits(deps.db, [{ key, max, windowMs }], new Date())).get(key)!;
    return { ok: g.granted > 0, windowEnd: g.windowEnd.getTime() };
  };
  const refusal = await evaluateRules(take, target.rules, client, parsed.match, new Date());
  if (refusal) return stop(refusal.reason, refusal.ruleId, refusal.headers);
  const live = await listening(request, target, deps);
  if (live === "not_deployed" || live === "bad_gateway") return stop(live);
  if (live === "waking") return stop("waking", null, { "retry-after": "5" });
  const d = live.deployment!;
  const found = d.serverId ? await forwardTarget(deps.db, deps.keyring, d.serverId) : ({ refused: "server_unreachable" } as const);
  if ("refused" in found) return stop(found.refused);
  // The outbound guard at every forward: a row written before the check existed, or under another OUTBOUND_ALLOW_PRIVATE, is refused too.
  const guard = publicUrlRefusal(found.origin.href, deps.allowPrivate);
  if (guard) {
    deps.logger.error("edge_forward_refused", { serverId: d.serverId, reason: guard });
    return stop("server_refused");
  }

  const proto = url.protocol === "https:" ? "https" : "http";
  const fields = { method: request.method, target: parsed.forward, host, clientAddress: clientText, proto, deploymentId: d.id } as const;
  const headers = new Headers();
  request.headers.forEach((value, name) => {
    if (!DROPPED.has(name) && !name.startsWith("cf-")) headers.set(name, value);
  });
  for (const [name, value] of Object.entries(await signForward(found.edgeKey, fields, new Date()))) headers.set(name, value);
  deps.waitUntil(touchDeployments(deps.db, [d.id], new Date()).catch(() => {}));

  let answer: Response;
  try {
    answer = await fetch(new URL(parsed.forward, found.origin), {
      method: request.method,
      headers,
      body: request.body,
      redirect: "manual",
    });
  } catch (error) {
    deps.logger.error("edge_forward_failed", { projectId: live.projectId, error: (error as Error).message });
    return stop("server_unreachable");
  }
  // A WebSocket (101, the server's socket in answer.webSocket): returned as it is, the runtime relays it to
  // the client message by message, both ways, closes included (each hop negotiates its own extensions).
  // Logged once, when the tunnel opens, with no bytes, as the self-hosted edge logs one. An app's other
  // answers to an upgrade are relayed below. Tested end to end: test/node/worker-edge-websocket.test.ts.
  if (answer.status === 101 || !answer.body) {
    await log(answer.status, 0, null, live);
    return answer;
  }
  let bytes = 0;
  const counted = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      bytes += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  deps.waitUntil(
    answer.body
      .pipeTo(counted.writable)
      .catch(() => {})
      .then(() => log(answer.status, bytes, null, live)),
  );
  return new Response(counted.readable, { status: answer.status, statusText: answer.statusText, headers: answer.headers });
}

/**
 * The target once its deployment listens on its server: at once, or, while it is starting or
 * asleep (woken here), when its server reports it within holdMs.
 */
async function listening(request: Request, target: EdgeTarget, deps: WorkerEdgeDeps): Promise<EdgeTarget | "not_deployed" | "bad_gateway" | "waking"> {
  let now: EdgeTarget | undefined = target;
  const deadline = performance.now() + deps.holdMs;
  for (;;) {
    const d = now?.deployment;
    if (!d) return "not_deployed";
    if (d.crashed) return "bad_gateway";
    // On the cloud every deployment runs on a server; one placed otherwise has nowhere to be served from.
    if (!d.remote) return "not_deployed";
    if (d.port) return now!;
    if (d.asleep) await wakeDeployment(deps.db, d.id);
    if (performance.now() >= deadline) return "waking";
    await new Promise((r) => setTimeout(r, HOLD_POLL_MS));
    now = await loadTargetOfHost(deps.db, deps.sharedDomain, hostnameOf(request.headers.get("host") ?? new URL(request.url).host)!);
  }
}
