/**
 * Placement: where a deployment builds and runs. Pure functions, no I/O, so the
 * route that queues a deployment, the read that explains why one still waits,
 * the in-process runner's claim and a remote runner's claim all apply the same
 * rules.
 *
 * 1. The per-deploy choice wins (spec, Settings rule 2): `target` and/or `serverId`
 *    (a `serverId` alone means `server`).
 * 2. Else Settings' `defaultDeployTarget` when it is `local` or `server` (`server`
 *    with its `defaultServerId`); `cloud` or null says nothing about placement.
 * 3. Else Settings' `buildMode`: `local`, `server`, or `auto`: local when this
 *    instance runs a runner, else a server.
 * On the cloud there is no local runner: every deployment goes to a server (a
 * `local` from Settings is ignored there; a per-deploy `target: local` is refused
 * by the route before this runs).
 *
 * A `server` placement requires the one server named (per deploy, else the
 * default) or, with none named, any server of the organization that is online,
 * not draining, and carries every requested label. When none qualifies the
 * deployment waits in the queue and `waitingFor` says why.
 */
import { ONLINE_WINDOW_MS } from "../servers/schema";

export type Placement = "local" | "server";

/** Why a queued deployment waits for a server. */
export const WAITING_REASONS = ["no_server", "server_deleted", "server_offline", "server_draining", "all_offline", "all_draining", "labels_unmatched"] as const;
export type WaitingFor = (typeof WAITING_REASONS)[number];

export const WAITING_DOC =
  "Why a `queued` deployment placed on a server waits (null when a runner can take it, and once it left the queue): `no_server`: the organization has no build server; `server_deleted`: the server it requires (per deploy, or Settings' `defaultServerId`) no longer exists; `server_offline`: that server has not reported for 60 s; `server_draining`: that server takes no new work; `all_offline`: none of its servers has reported for 60 s; `labels_unmatched`: no online server carries every requested label; `all_draining`: every online server that would qualify is draining. Recomputed on every read while queued: a server coming online clears it";

export interface PlacementChoice {
  target?: Placement;
  serverId?: string;
  labels?: string[];
}

export interface PlacementSettings {
  buildMode: "auto" | "server" | "local";
  defaultDeployTarget: "local" | "server" | "cloud" | null;
  defaultServerId: string | null;
}

/** A server as placement sees it. */
export interface CandidateServer {
  id: string;
  labels: string[];
  draining: boolean;
  lastSeenAt: Date | null;
}

/** Where it goes: a server placement names its required server (or null: any eligible one) and the labels it needs. */
export interface Decision {
  placement: Placement;
  serverId: string | null;
  labels: string[];
}

/** Placement from the per-deploy choice, Settings and the runtime (rules 1-3 above). */
export function decidePlacement(choice: PlacementChoice, settings: PlacementSettings, runtime: { cloud: boolean; localRunner: boolean }): Decision {
  const labels = [...new Set(choice.labels ?? [])];
  const server = (serverId: string | null): Decision => ({ placement: "server", serverId, labels: serverId ? [] : labels });
  const local: Decision = { placement: "local", serverId: null, labels: [] };
  // A per-deploy server choice (or bare labels) wins; without a named server, the default server still applies.
  if (choice.serverId !== undefined) return server(choice.serverId);
  if (choice.target === "local") return runtime.cloud ? server(settingsServer(settings)) : local;
  if (choice.target === "server") return server(settingsServer(settings, labels.length > 0));
  if (labels.length > 0) return server(null);
  if (runtime.cloud) return server(settingsServer(settings));
  if (settings.defaultDeployTarget === "local") return local;
  if (settings.defaultDeployTarget === "server") return server(settingsServer(settings));
  if (settings.buildMode === "local") return local;
  if (settings.buildMode === "server") return server(settingsServer(settings));
  return runtime.localRunner ? local : server(settingsServer(settings));
}

/** The Settings default server, when Settings target a server and the deploy asked for no labels of its own. */
function settingsServer(settings: PlacementSettings, ownLabels = false): string | null {
  if (ownLabels) return null;
  return settings.defaultDeployTarget === "server" ? settings.defaultServerId : null;
}

const isOnline = (s: CandidateServer, now: Date) => s.lastSeenAt !== null && now.getTime() - s.lastSeenAt.getTime() < ONLINE_WINDOW_MS;

/** Whether `server` may take work placed by `d` now (a remote runner's claim asks this of itself). */
export function eligible(d: Decision, server: CandidateServer, now: Date): boolean {
  if (d.placement !== "server" || !isOnline(server, now) || server.draining) return false;
  if (d.serverId !== null) return server.id === d.serverId;
  return d.labels.every((l) => server.labels.includes(l));
}

/**
 * Why a deployment placed by `d` waits, given the organization's servers now;
 * null when one may take it. A `local` placement never waits here: the
 * in-process runner of the instance takes it.
 */
export function waitingFor(d: Decision, servers: CandidateServer[], now: Date): WaitingFor | null {
  if (d.placement === "local") return null;
  if (d.serverId !== null) {
    const required = servers.find((s) => s.id === d.serverId);
    if (!required) return "server_deleted";
    if (!isOnline(required, now)) return "server_offline";
    return required.draining ? "server_draining" : null;
  }
  if (servers.length === 0) return "no_server";
  const online = servers.filter((s) => isOnline(s, now));
  if (online.length === 0) return "all_offline";
  const matching = online.filter((s) => d.labels.every((l) => s.labels.includes(l)));
  if (matching.length === 0) return "labels_unmatched";
  return matching.some((s) => !s.draining) ? null : "all_draining";
}

const MESSAGES: Record<WaitingFor, string> = {
  no_server: "The organization has no build server: register one (POST /api/servers) and start its runner",
  server_deleted: "The build server this deployment requires no longer exists: deploy again choosing another server, or change Settings' default server",
  server_offline: "The build server this deployment requires has not reported for 60 s: it is taken once that server's runner is back",
  server_draining: "The build server this deployment requires is draining (takes no new work): undrain it or deploy again elsewhere",
  all_offline: "None of the organization's build servers has reported for 60 s: it is taken once one is back",
  all_draining: "Every online build server that could take it is draining (takes no new work)",
  labels_unmatched: "No online build server carries every requested label",
};

/** The human sentence for a waiting reason. */
export const waitingMessage = (w: WaitingFor | null): string | null => (w ? MESSAGES[w] : null);
