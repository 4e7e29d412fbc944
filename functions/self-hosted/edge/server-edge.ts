/**
 * A build server's edge (issue 22, item 5): what `wsp runner` puts on its public
 * port in front of the apps it runs. It serves only requests forwarded by the
 * control plane's edge (the Worker, or a self-hosted instance's edge), signed
 * with this server's edge key (shared/net/edge-forward.ts): the forwarding edge
 * has already applied the project's route rules and logged the request, so a
 * request that did not pass through it must not reach the app.
 *
 * Per request: ambiguous framing → 400 and the connection closed (framing.ts,
 * as on every edge); unsigned, badly signed, or signed outside the clock window
 * → 403 (`not_forwarded`); a deployment this server does not run → 404; one
 * starting (asleep, waking, restarting: no port yet) is held up to `holdMs`,
 * then 503 with Retry-After; else proxied to the app's local port by the
 * adapter's proxy (proxy.ts: the same hop-by-hop and smuggling defenses,
 * WebSockets included), with the signed Host and client address as the app's
 * Host and `X-Forwarded-For`. The signed target is sent on as received: the
 * forwarding edge normalized it before signing (request-path.ts).
 *
 * Its key is derived from the runner token (deriveEdgeKey); the port of each
 * deployment comes from the runner's supervisor (`portOf`).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "../../../shared/http/logger";
import { type ForwardFields, verifyForward } from "../../../shared/net/edge-forward";
import { requestFraming } from "./framing";
import { type EdgeReason, sendPage, sendPageOnSocket } from "./pages";
import { type Forwarding, proxyHttp, proxyUpgrade } from "./proxy";

export interface ServerEdgeDeps {
  /** This server's edge key: deriveEdgeKey(runner token). */
  edgeKey: string;
  /**
   * Where a deployment's app listens on this machine: its port; null while it is
   * not listening (starting, asleep, restarting); undefined when this server does not run it.
   */
  portOf(deploymentId: string): number | null | undefined;
  /** Called when a request waits for an app without a port (the runner may start a sleeping app at once). */
  onHeld?(deploymentId: string): void;
  /** How long a request waits for its app to listen; then 503 with Retry-After. Default 30 s. */
  holdMs?: number;
  logger?: Logger;
  clock?: () => Date;
}

export interface ServerEdge {
  handle(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void;
}

const DEFAULT_HOLD_MS = 30_000;
const HOLD_POLL_MS = 25;

export function createServerEdge(deps: ServerEdgeDeps): ServerEdge {
  const clock = deps.clock ?? (() => new Date());
  const holdMs = deps.holdMs ?? DEFAULT_HOLD_MS;

  /** The signed fields, or null (the request is refused). A repeated header reads as absent. */
  async function verified(req: IncomingMessage): Promise<ForwardFields | null> {
    const header = (name: string) => {
      const v = req.headers[name];
      return typeof v === "string" ? v : undefined;
    };
    const result = await verifyForward(deps.edgeKey, { method: req.method ?? "", target: req.url ?? "", header }, clock());
    if (result.ok) return result.fields;
    deps.logger?.info("server_edge_refused", { reason: result.reason });
    return null;
  }

  /** The app's port, waiting up to holdMs while it starts; a reason when there is none to give. */
  async function portFor(deploymentId: string): Promise<number | { reason: EdgeReason; headers: Record<string, string> }> {
    let port = deps.portOf(deploymentId);
    if (port === undefined) return { reason: "not_deployed", headers: {} };
    if (port === null) deps.onHeld?.(deploymentId);
    const deadline = performance.now() + holdMs;
    while (port === null && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, HOLD_POLL_MS));
      port = deps.portOf(deploymentId);
    }
    if (port === undefined) return { reason: "not_deployed", headers: {} };
    if (port === null) return { reason: "waking", headers: { "retry-after": "5" } };
    return port;
  }

  const forwarding = (f: ForwardFields): Forwarding => ({ clientAddress: f.clientAddress, proto: f.proto, host: f.host });

  async function serve(req: IncomingMessage, res: ServerResponse, body: "none" | "length" | "chunked") {
    try {
      const fields = await verified(req);
      if (!fields) {
        req.resume();
        sendPage(res, "not_forwarded");
        return;
      }
      const port = await portFor(fields.deploymentId);
      if (typeof port !== "number") {
        req.resume();
        sendPage(res, port.reason, port.headers);
        return;
      }
      await proxyHttp(req, res, port, req.url!, forwarding(fields), body);
    } catch (error) {
      deps.logger?.error("server_edge_request_failed", { error: (error as Error).message });
      sendPage(res, "bad_gateway");
    }
  }

  async function serveUpgrade(req: IncomingMessage, socket: Socket, head: Buffer) {
    try {
      const fields = await verified(req);
      if (!fields) return sendPageOnSocket(socket, "not_forwarded");
      const port = await portFor(fields.deploymentId);
      if (typeof port !== "number") return sendPageOnSocket(socket, port.reason, port.headers);
      await proxyUpgrade(req, socket, head, port, req.url!, forwarding(fields));
    } catch (error) {
      deps.logger?.error("server_edge_upgrade_failed", { error: (error as Error).message });
      sendPageOnSocket(socket, "bad_gateway");
    }
  }

  return {
    handle(req, res) {
      const framing = requestFraming(req);
      if ("refused" in framing) {
        res.shouldKeepAlive = false;
        req.resume();
        sendPage(res, "bad_request");
        return;
      }
      void serve(req, res, framing.body);
    },
    upgrade(req, socket, head) {
      if ("refused" in requestFraming(req)) return sendPageOnSocket(socket, "bad_request");
      socket.on("error", () => socket.destroy());
      void serveUpgrade(req, socket, head);
    },
  };
}
