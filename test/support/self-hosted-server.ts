/**
 * `npm start`'s server for end-to-end edge tests: startSelfHosted on a fresh
 * Postgres database with the runner on, the test git host as `gitea`, an owner
 * token; an API helper and a request helper that reaches the edge (the server's
 * port with an app's Host). Opened in beforeAll, closed in afterAll.
 */
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { startGitServer, type GitTestServer } from "./git-server";
import { runnerFixture } from "./runner-harness";
import { TEST_SECRET_KEYS } from "./test-keys";

export const SHARED_DOMAIN = "apps.test";
const TOKEN = "e2e-owner-token-0123456789abcdef0123456789abcdef";

export interface EdgeAnswer {
  status: number;
  body: string;
  /** The edge's own page reason (X-Workspace-Edge), absent on the app's answers. */
  edge?: string;
}

export function useSelfHostedServer(prefix: string, env: Record<string, string> = {}) {
  const s = {} as { git: GitTestServer; server: RunningServer; port: number; fixture: Awaited<ReturnType<typeof runnerFixture>> };

  beforeAll(async () => {
    s.git = await startGitServer();
    s.fixture = await runnerFixture(prefix);
    const config = loadNodeConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: s.fixture.dataDir,
      DATABASE_URL: s.fixture.db.url,
      SECRET_KEYS: TEST_SECRET_KEYS,
      WORKSPACE_OWNER_TOKEN: TOKEN,
      LOG_LEVEL: "silent",
      SHARED_DOMAIN,
      OUTBOUND_ALLOW_PRIVATE: "true",
      GIT_GITEA_URL: s.git.url,
      RUNNER: "on",
      BUILD_TIMEOUT: "60s",
      HEALTH_TIMEOUT: "20s",
      STOP_GRACE: "1s",
      // Tests that need the smoke window set their own.
      SMOKE_WINDOW: "0s",
      ...env,
    });
    s.server = await startSelfHosted(config, () => {});
    s.port = Number(new URL(s.server.url).port);
  }, 60_000);

  afterAll(async () => {
    await s.server?.close();
    await s.git?.close();
    await s.fixture?.drop();
  });

  /** An API call with the owner token; throws unless the status is `expected`. */
  async function api<T>(method: string, path: string, json?: unknown, expected = 200): Promise<T> {
    const res = await fetch(`${s.server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(json ? { "content-type": "application/json" } : {}) },
      body: json ? JSON.stringify(json) : undefined,
    });
    const body = await res.text();
    if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${body}`);
    return (body ? JSON.parse(body) : undefined) as T;
  }

  /** A request to the server's port with an app's Host. */
  function viaEdge(host: string, path = "/"): Promise<EdgeAnswer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port: s.port, path, headers: { host } }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode!, body, edge: res.headers["x-workspace-edge"] as string | undefined }));
      });
      req.on("error", reject);
      req.end();
    });
  }

  return { api, viaEdge, port: () => s.port, git: () => s.git, databaseUrl: () => s.fixture.db.url };
}
