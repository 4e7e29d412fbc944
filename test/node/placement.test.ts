/** Placement's rules (functions/deployments/placement.ts), one by one, without a database. */
import { describe, expect, it } from "vitest";
import {
  type CandidateServer,
  type Decision,
  decidePlacement,
  eligible,
  type PlacementSettings,
  waitingFor,
  waitingMessage,
} from "../../functions/deployments/placement";

const NOW = new Date("2026-01-01T12:00:00Z");
const DEFAULTS: PlacementSettings = { buildMode: "auto", defaultDeployTarget: null, defaultServerId: null };
const SELF_HOSTED = { cloud: false, localRunner: true };
const NO_RUNNER = { cloud: false, localRunner: false };
const CLOUD = { cloud: true, localRunner: false };

const online = (id: string, more: Partial<CandidateServer> = {}): CandidateServer => ({
  id,
  labels: [],
  draining: false,
  lastSeenAt: new Date(NOW.getTime() - 5_000),
  ...more,
});
const offline = (id: string, more: Partial<CandidateServer> = {}) => online(id, { lastSeenAt: new Date(NOW.getTime() - 61_000), ...more });

describe("decidePlacement", () => {
  it("auto: local when this instance runs a runner, else any server", () => {
    expect(decidePlacement({}, DEFAULTS, SELF_HOSTED)).toEqual({ placement: "local", serverId: null, labels: [] });
    expect(decidePlacement({}, DEFAULTS, NO_RUNNER)).toEqual({ placement: "server", serverId: null, labels: [] });
  });

  it("buildMode local and server", () => {
    expect(decidePlacement({}, { ...DEFAULTS, buildMode: "local" }, NO_RUNNER).placement).toBe("local");
    expect(decidePlacement({}, { ...DEFAULTS, buildMode: "server" }, SELF_HOSTED)).toEqual({ placement: "server", serverId: null, labels: [] });
  });

  it("defaultDeployTarget wins over buildMode; server uses defaultServerId; cloud and null say nothing", () => {
    const toServer = { buildMode: "local", defaultDeployTarget: "server", defaultServerId: "srv_d" } as const;
    expect(decidePlacement({}, toServer, SELF_HOSTED)).toEqual({ placement: "server", serverId: "srv_d", labels: [] });
    expect(decidePlacement({}, { buildMode: "server", defaultDeployTarget: "local", defaultServerId: null }, NO_RUNNER).placement).toBe("local");
    expect(decidePlacement({}, { buildMode: "local", defaultDeployTarget: "cloud", defaultServerId: null }, NO_RUNNER).placement).toBe("local");
  });

  it("the per-deploy choice wins over every setting", () => {
    const toServer = { buildMode: "server", defaultDeployTarget: "server", defaultServerId: "srv_d" } as const;
    expect(decidePlacement({ target: "local" }, toServer, SELF_HOSTED).placement).toBe("local");
    expect(decidePlacement({ serverId: "srv_x" }, toServer, SELF_HOSTED)).toEqual({ placement: "server", serverId: "srv_x", labels: [] });
    expect(decidePlacement({ target: "server" }, { ...DEFAULTS, buildMode: "local" }, SELF_HOSTED)).toEqual({
      placement: "server",
      serverId: null,
      labels: [],
    });
    // target server without a server of its own still takes the default server
    expect(decidePlacement({ target: "server" }, toServer, SELF_HOSTED).serverId).toBe("srv_d");
  });

  it("labels imply a server and replace the default server (deduplicated)", () => {
    const toServer = { buildMode: "auto", defaultDeployTarget: "server", defaultServerId: "srv_d" } as const;
    expect(decidePlacement({ labels: ["gpu", "gpu", "eu"] }, toServer, SELF_HOSTED)).toEqual({ placement: "server", serverId: null, labels: ["gpu", "eu"] });
    expect(decidePlacement({ target: "server", labels: ["gpu"] }, toServer, SELF_HOSTED)).toEqual({ placement: "server", serverId: null, labels: ["gpu"] });
  });

  it("on the cloud every deployment goes to a server, a Settings local included", () => {
    expect(decidePlacement({}, DEFAULTS, CLOUD).placement).toBe("server");
    expect(decidePlacement({}, { buildMode: "local", defaultDeployTarget: "local", defaultServerId: null }, CLOUD).placement).toBe("server");
    expect(decidePlacement({}, { buildMode: "local", defaultDeployTarget: "server", defaultServerId: "srv_d" }, CLOUD).serverId).toBe("srv_d");
  });
});

describe("waitingFor and eligible", () => {
  const anyServer: Decision = { placement: "server", serverId: null, labels: [] };
  const required: Decision = { placement: "server", serverId: "srv_a", labels: [] };
  const gpu: Decision = { placement: "server", serverId: null, labels: ["gpu"] };

  it("local never waits here, and no server is eligible for it", () => {
    const local: Decision = { placement: "local", serverId: null, labels: [] };
    expect(waitingFor(local, [], NOW)).toBeNull();
    expect(eligible(local, online("srv_a"), NOW)).toBe(false);
  });

  it("a required server: deleted, offline, draining, else none", () => {
    expect(waitingFor(required, [online("srv_b")], NOW)).toBe("server_deleted");
    expect(waitingFor(required, [offline("srv_a"), online("srv_b")], NOW)).toBe("server_offline");
    expect(waitingFor(required, [online("srv_a", { draining: true })], NOW)).toBe("server_draining");
    expect(waitingFor(required, [online("srv_a")], NOW)).toBeNull();
    expect(eligible(required, online("srv_a"), NOW)).toBe(true);
    expect(eligible(required, online("srv_b"), NOW)).toBe(false);
  });

  it("any server: none, all offline, all draining, else none", () => {
    expect(waitingFor(anyServer, [], NOW)).toBe("no_server");
    expect(waitingFor(anyServer, [offline("srv_a")], NOW)).toBe("all_offline");
    expect(waitingFor(anyServer, [online("srv_a", { draining: true }), offline("srv_b")], NOW)).toBe("all_draining");
    expect(waitingFor(anyServer, [online("srv_a", { draining: true }), online("srv_b")], NOW)).toBeNull();
  });

  it("labels: unmatched, matched but draining, matched", () => {
    expect(waitingFor(gpu, [online("srv_a", { labels: ["cpu"] })], NOW)).toBe("labels_unmatched");
    expect(waitingFor(gpu, [online("srv_a", { labels: ["gpu"], draining: true }), online("srv_b")], NOW)).toBe("all_draining");
    expect(waitingFor(gpu, [online("srv_a", { labels: ["gpu", "eu"] })], NOW)).toBeNull();
    expect(eligible(gpu, online("srv_a", { labels: ["cpu"] }), NOW)).toBe(false);
    expect(eligible(gpu, offline("srv_a", { labels: ["gpu"] }), NOW)).toBe(false);
  });

  it("every reason has a sentence", () => {
    expect(waitingMessage(null)).toBeNull();
    expect(waitingMessage("no_server")).toMatch(/POST \/api\/servers/);
  });
});
