/**
 * The self-hosted edge: requests whose Host is a project's free route
 * (`<slug>.<SHARED_DOMAIN>`), a preview's (`<slug>--<environment>.<SHARED_DOMAIN>`)
 * or a connected domain go to that environment's current deployment; a Host in
 * `apiHosts` (configuration, never the request's choice: api-hosts.ts), or no
 * Host at all, is the API's, whatever project or domain claims it; any other
 * Host gets the edge's 404 page (an unknown name under SHARED_DOMAIN, a domain
 * just removed), never the API or the console. It sits in front of the API on
 * the same listener (one port, one `npm start`).
 *
 * Order per request: ambiguous framing or Host (framing.ts; any request on the
 * listener, the API's too) → 400 and the connection closed; a target over MAX_TARGET → 414; disabled project → 503;
 * route rules (ban, allow-deny, rate limit) on the normalized path
 * (request-path.ts) → 403/429; nothing deployed → 404; a crashed deployment →
 * 502; proxy (with the normalized path) → the app's answer, or 502 when it does
 * not answer. Each request becomes a `request` log line (query
 * strings and headers are never stored: they carry secrets).
 *
 * A current deployment running on a build server (placement `server`, issue 22)
 * is not proxied to a local port: once the server reports it listening (held
 * like a local one meanwhile; a sleeping one is woken first), the request is
 * forwarded to the server's public URL, streaming both ways, with the original
 * Host, client address and deployment in headers signed with the server's edge
 * key (shared/net/edge-forward.ts, functions/servers/forward-target.ts); the
 * server's edge (server-edge.ts) serves only such requests. Route rules and the
 * request log apply here, where the request is first received; the server
 * applies neither again.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Keyring } from "../../../shared/crypto/keyring";
import type { Db } from "../../../shared/db/types";
import type { Logger } from "../../../shared/http/logger";
import type { Cidr } from "../../../shared/net/cidr";
import { signForward } from "../../../shared/net/edge-forward";
import type { RequestLogWriter } from "../../logs/writer";
import { guardedForwardConnect, type Resolve } from "../../servers/forward-lookup-node";
import { forwardTarget } from "../../servers/forward-target";
import { type Client, clientAddress, isTrustedPeer } from "./client-address";
import { type BodyFraming, requestFraming } from "./framing";
import { type EdgeReason, sendPage, sendPageOnSocket, statusOf } from "./pages";
import { type Forwarding, proxyHttp, proxyUpgrade, type Upstream } from "./proxy";
import { requestLogLine } from "./request-log";
import { type RequestPath, requestPath } from "./request-path";
import { hostnameOf, type RouteTable } from "./route-table";
import { createRateBatcher } from "./rate-batcher";
import { evaluateRules } from "./rules";
import { type EdgeTarget, pruneEdgeRateLimits, touchDeployments, wakeDeployment } from "./store";
import { countEdgeRequest } from "../../operations/metrics/process-metrics";

export interface Edge {
  /** Takes the request unless its Host is the API's (or absent); false: the API answers it. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Takes an upgrade (WebSocket) unless its Host is the API's; false: not ours (the socket is left to the caller). */
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): boolean;
  /** Stops the edge's timers (the rate-limit prune). */
  stop(): void;
}

export interface EdgeDeps {
  db: Db;
  table: RouteTable;
  logs: RequestLogWriter;
  logger: Logger;
  trustedProxies: Cidr[];
  /** How long a request waits for a current deployment that is not listening yet (HEALTH_TIMEOUT); then 503 with Retry-After. */
  holdMs: number;
  /** How often, at most, a deployment's last request time is written (sleep mode measures idleness from it). */
  touchEveryMs: number;
  /** Called after a request woke a sleeping deployment (this process's runner starts it at once; others hear the database's notification). */
  onWake?: () => void;
  clock?: () => Date;
  /**
   * The hostnames the API answers (api-hosts.ts), even when a project's slug or
   * a connected domain equals one: an app must never take over the API's own
   * name. Any case, with or without a port. Every other Host is an app's or the
   * edge's 404.
   */
  apiHosts: string[];
  /**
   * How often this process deletes the edge's ended rate-limit windows
   * (`edge:<rule>:<client>` rows of `rate_limits`); 0: never. Default 60 s.
   */
  pruneEveryMs?: number;
  /** Decrypts build servers' edge keys (forwarding); without it a deployment on a server is answered `server_unkeyed`. */
  keyring?: Keyring;
  /**
   * OUTBOUND_ALLOW_PRIVATE: forwarding to a server whose public URL leads to a loopback or
   * private address is allowed (link-local and metadata never are). Default false.
   */
  outboundAllowPrivate?: boolean;
  /** Resolves a server's name before forwarding (tests answer a private address for a public-looking name); default: the system's. */
  resolve?: Resolve;
}

/** How often a held request looks at the route table again. */
const HOLD_POLL_MS = 25;
/**
 * How far apart the re-reads for requests that found nothing deployed begin (route-table.ts, refresh; each reads
 * every project waiting): such a request waits up to about this long plus the read, and a flood of them, to one
 * project or many, costs at most one read per this interval.
 */
export const NOT_DEPLOYED_READ_SPACING_MS = 25;

/** What a target longer than MAX_TARGET is logged and checked as (it is refused with 414 before any rule). */
const TOO_LONG: RequestPath = { path: "/", forward: "/", match: ["/"] };
const DEFAULT_PRUNE_EVERY_MS = 60_000;

export function createEdge(deps: EdgeDeps): Edge {
  const clock = deps.clock ?? (() => new Date());
  const takeRate = createRateBatcher(deps.db, clock);
  const apiHosts = new Set(deps.apiHosts.map((h) => hostnameOf(h)).filter((h): h is string => h !== undefined));
  /** "api" for the API's requests (its names, or no Host: an HTTP/1.0 client, a health check), else the app's target or undefined (the edge's 404). */
  const targetOf = (req: IncomingMessage): EdgeTarget | "api" | undefined => {
    const host = hostnameOf(req.headers.host);
    if (host === undefined || apiHosts.has(host)) return "api";
    return deps.table.lookup(req.headers.host);
  };

  // Ended rate-limit windows are deleted now and then (a later request starts a new window anyway).
  const pruneEveryMs = deps.pruneEveryMs ?? DEFAULT_PRUNE_EVERY_MS;
  const pruner =
    pruneEveryMs > 0
      ? setInterval(() => {
          pruneEdgeRateLimits(deps.db, clock()).catch((error) => deps.logger.error("edge_rate_limit_prune_failed", { error: (error as Error).message }));
        }, pruneEveryMs)
      : undefined;
  pruner?.unref();

  // Last request times, written in batches: at most one write per deployment per touchEveryMs.
  const touched = new Map<string, number>();
  const dueTouches = new Set<string>();
  let touchScheduled = false;
  function touch(deploymentId: string) {
    const now = Date.now();
    if (now - (touched.get(deploymentId) ?? 0) < deps.touchEveryMs) return;
    // Entries of apps long gone would pile up: forgetting them all costs one extra write each.
    if (touched.size > 10_000) touched.clear();
    touched.set(deploymentId, now);
    dueTouches.add(deploymentId);
    if (touchScheduled) return;
    touchScheduled = true;
    setTimeout(() => {
      touchScheduled = false;
      const ids = [...dueTouches];
      dueTouches.clear();
      touchDeployments(deps.db, ids, clock()).catch((error) => deps.logger.error("edge_touch_failed", { error: (error as Error).message }));
    }, 50);
  }

  /**
   * The target once its current deployment listens: at once, or, while it is starting
   * (promoted, waking; on a build server too), when it does within holdMs; null when not.
   */
  async function listening(host: string | undefined, target: EdgeTarget): Promise<EdgeTarget | null> {
    const d = target.deployment;
    if (d?.port) return target;
    if (d?.asleep && (await wakeDeployment(deps.db, d.id))) deps.onWake?.();
    const deadline = performance.now() + deps.holdMs;
    while (performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, HOLD_POLL_MS));
      const now = deps.table.lookup(host);
      if (!now?.deployment) return null;
      if (now.deployment.port) return now;
    }
    return null;
  }

  /** A deployment on a build server: its edge's origin and this request's signed headers, or why it cannot be forwarded. */
  async function remoteUpstream(req: IncomingMessage, target: EdgeTarget, forward: string, f: Forwarding): Promise<Upstream | Stop> {
    const d = target.deployment!;
    const found = deps.keyring && d.serverId ? await forwardTarget(deps.db, deps.keyring, d.serverId) : ({ refused: "server_unkeyed" } as const);
    if ("refused" in found) return { reason: found.refused, ruleId: null, headers: {} };
    // The outbound guard, on the address connected to (the name resolved now, not when publicUrl was set).
    const connect = await guardedForwardConnect(found.origin, deps.outboundAllowPrivate ?? false, deps.resolve);
    if ("refused" in connect) {
      deps.logger.error("edge_forward_refused", { serverId: d.serverId, reason: connect.refused });
      return { reason: "server_refused", ruleId: null, headers: {} };
    }
    const fields = {
      method: req.method ?? "GET",
      target: forward,
      host: req.headers.host ?? "",
      clientAddress: f.clientAddress,
      proto: f.proto,
      deploymentId: d.id,
    };
    // The server checks the signature's time against its own clock: the real time, never a test's.
    return { origin: found.origin, signed: await signForward(found.edgeKey, fields, new Date()), lookup: connect.lookup };
  }

  /**
   * A project with nothing deployed, read again by a read that begins after this request arrived: its deployment
   * may have become current (and been reported ready) before the notification reached this table.
   */
  async function reread(host: string | undefined, target: EdgeTarget): Promise<EdgeTarget | undefined> {
    await deps.table.refresh(target.projectId, NOT_DEPLOYED_READ_SPACING_MS);
    const now = deps.table.lookup(host);
    return now?.projectId === target.projectId ? now : undefined;
  }

  type Stop = { reason: EdgeReason; ruleId: string | null; headers: Record<string, string> };
  type Gated = Stop | { upstream: Upstream; target: EdgeTarget };

  /**
   * What stops the request before the app (a refusal, or a reason the edge answers itself), else the app's port.
   * Synchronous when nothing needs the database or a wait (no rate limit to count, a deployment listening on
   * this machine): the common request then costs no promise and no microtask turn.
   */
  function gate(req: IncomingMessage, target: EdgeTarget, path: RequestPath | null, client: Client): Gated | Promise<Gated> {
    if (!path) return { reason: "too_long", ruleId: null, headers: {} };
    if (target.disabled) return { reason: "disabled", ruleId: null, headers: {} };
    // The clock is read only when a rule may need it (a ban's expiry, a rate-limit window).
    const refusal = path.match.length > 0 && target.rules.length === 0 ? null : evaluateRules(takeRate, target.rules, client, path.match, clock());
    if (refusal instanceof Promise) return refusal.then((r) => r ?? admit(req, target, path, client));
    return refusal ?? admit(req, target, path, client);
  }

  /** Past the rules: the local port of a deployment that listens now, or what waiting, waking or forwarding decides. */
  function admit(req: IncomingMessage, target: EdgeTarget, path: RequestPath, client: Client): Gated | Promise<Gated> {
    const d = target.deployment;
    if (d?.port && !d.crashed && !d.remote) return { upstream: d.port, target };
    return admitLater(req, target, path, client);
  }

  async function admitLater(req: IncomingMessage, target: EdgeTarget, path: RequestPath, client: Client): Promise<Gated> {
    const serving = target.deployment ? target : await reread(req.headers.host, target);
    if (!serving?.deployment) return { reason: "not_deployed", ruleId: null, headers: {} };
    if (serving.deployment.crashed) return { reason: "bad_gateway", ruleId: null, headers: {} };
    const live = await listening(req.headers.host, serving);
    if (live === null) return { reason: "waking", ruleId: null, headers: { "retry-after": "5" } };
    if (!live.deployment!.remote) return { upstream: live.deployment!.port!, target: live };
    const upstream = await remoteUpstream(req, live, path.forward, forwarding(req, client.text));
    return typeof upstream === "object" && "reason" in upstream ? upstream : { upstream, target: live };
  }

  function record(
    req: IncomingMessage,
    target: EdgeTarget,
    path: string,
    client: string,
    started: number,
    status: number,
    bytes: number,
    ruleId: string | null,
  ) {
    const durationMs = Math.round(performance.now() - started);
    countEdgeRequest(status, ruleId);
    deps.logs.write(
      requestLogLine(target, { method: req.method, host: req.headers.host ?? null, path, client, status, durationMs, bytes, ruleId, at: clock() }),
    );
  }

  /**
   * A connection's peer, parsed once per socket (a keep-alive connection carries many requests, and its
   * peer address cannot change): the client it is, and whether it is a trusted proxy whose forwarding
   * headers are read per request.
   */
  const peers = new WeakMap<Socket, { client: Client; trusted: boolean }>();
  function peerOf(socket: Socket): { client: Client; trusted: boolean } {
    let peer = peers.get(socket);
    if (!peer) {
      const address = socket.remoteAddress;
      peer = { client: clientAddress(address, undefined, []), trusted: isTrustedPeer(address, deps.trustedProxies) };
      // A destroyed socket has no address any more: not cached, so nothing is ever remembered as "unknown".
      if (address !== undefined) peers.set(socket, peer);
    }
    return peer;
  }

  /** The client behind trusted proxies: X-Forwarded-For, else Forwarded's `for=` (shared/net/forwarded-client.ts). */
  const clientOf = (req: IncomingMessage): Client =>
    peerOf(req.socket).trusted
      ? clientAddress(req.socket.remoteAddress, req.headers["x-forwarded-for"], deps.trustedProxies, req.headers.forwarded)
      : peerOf(req.socket).client;

  function forwarding(req: IncomingMessage, client: string): Forwarding {
    // A trusted proxy's chain continues; anyone else's X-Forwarded-For is dropped.
    const trustedPeer = peerOf(req.socket).trusted;
    const xff = req.headers["x-forwarded-for"];
    const proto = req.headers["x-forwarded-proto"];
    return {
      clientAddress: client,
      forwardedFor: trustedPeer && typeof xff === "string" ? xff : undefined,
      proto: trustedPeer && proto === "https" ? "https" : "http",
    };
  }

  /** A request whose framing or Host is ambiguous: 400, and the connection closed (what follows on it cannot be trusted to be a request). */
  function refuse(req: IncomingMessage, res: ServerResponse, target: EdgeTarget | "api" | undefined) {
    const started = performance.now();
    res.shouldKeepAlive = false;
    const bytes = sendPage(res, "bad_request");
    if (!target || target === "api") return;
    const client = clientOf(req);
    record(req, target, (requestPath(req.url) ?? TOO_LONG).path, client.text, started, 400, bytes, null);
  }

  function serve(req: IncomingMessage, res: ServerResponse, target: EdgeTarget, body: BodyFraming) {
    const started = performance.now();
    const parsed = requestPath(req.url);
    const path = (parsed ?? TOO_LONG).path;
    const client = clientOf(req);
    const failed = (error: unknown) => {
      deps.logger.error("edge_request_failed", { projectId: target.projectId, error: (error as Error).message });
      const bytes = sendPage(res, "bad_gateway");
      record(req, target, path, client.text, started, 502, bytes, null);
    };
    const pass = (gated: Gated) => {
      if (!("upstream" in gated)) {
        req.resume();
        const bytes = sendPage(res, gated.reason, gated.headers);
        record(req, target, path, client.text, started, statusOf(gated.reason), bytes, gated.ruleId);
        return;
      }
      touch(gated.target.deployment!.id);
      proxyHttp(req, res, gated.upstream, parsed!.forward, forwarding(req, client.text), body).then(
        (result) => record(req, gated.target, path, client.text, started, result.status, result.bytes, null),
        failed,
      );
    };
    try {
      const gated = gate(req, target, parsed, client);
      if (gated instanceof Promise) gated.then(pass).catch(failed);
      else pass(gated);
    } catch (error) {
      failed(error);
    }
  }

  async function serveUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, target: EdgeTarget) {
    const started = performance.now();
    const parsed = requestPath(req.url);
    const path = (parsed ?? TOO_LONG).path;
    const client = clientOf(req);
    try {
      const gated = await gate(req, target, parsed, client);
      if (!("upstream" in gated)) {
        sendPageOnSocket(socket, gated.reason, gated.headers);
        record(req, target, path, client.text, started, statusOf(gated.reason), 0, gated.ruleId);
        return;
      }
      touch(gated.target.deployment!.id);
      // Logged with the app's answer: 101 when a tunnel opened, else the status relayed (and the connection closed).
      const result = await proxyUpgrade(req, socket, head, gated.upstream, parsed!.forward, forwarding(req, client.text));
      record(req, gated.target, path, client.text, started, result.status, result.bytes, null);
    } catch (error) {
      deps.logger.error("edge_upgrade_failed", { projectId: target.projectId, error: (error as Error).message });
      sendPageOnSocket(socket, "bad_gateway");
      record(req, target, path, client.text, started, 502, 0, null);
    }
  }

  return {
    handle(req, res) {
      const framing = requestFraming(req);
      const target = targetOf(req);
      if ("refused" in framing) {
        refuse(req, res, target);
        return true;
      }
      if (target === "api") return false;
      if (!target) {
        req.resume();
        sendPage(res, "unknown_host");
        return true;
      }
      serve(req, res, target, framing.body);
      return true;
    },
    upgrade(req, socket, head) {
      if ("refused" in requestFraming(req)) {
        sendPageOnSocket(socket, "bad_request");
        return true;
      }
      const target = targetOf(req);
      if (target === "api") return false;
      if (!target) {
        sendPageOnSocket(socket, "unknown_host");
        return true;
      }
      void serveUpgrade(req, socket, head, target);
      return true;
    },
    stop() {
      if (pruner) clearInterval(pruner);
    },
  };
}
