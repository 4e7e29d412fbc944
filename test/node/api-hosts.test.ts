/**
 * The API's hostnames are configuration (PUBLIC_URL, API_HOSTS, the loopback
 * names, the bound addresses), never the Host a request chose: the outside
 * attack connected `api.atk.test` as a member's domain while calling the API
 * under that Host, and the owner's later requests (bearer token included)
 * reached the member's app. Real `npm start` servers on Postgres.
 */
import { request as httpRequest } from "node:http";
import { describe, expect, it } from "vitest";
import { apiHostnames, apiHostsWarning, configuredApiHosts } from "../../functions/self-hosted/api-hosts";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { SHARED_DOMAIN, useSelfHostedServer } from "../support/self-hosted-server";

const TOKEN = "e2e-owner-token-0123456789abcdef0123456789abcdef";

/** A request to the server's port under `host` with the owner's token: what a client configured with that name sends. */
function call(port: number, host: string, method: string, path: string, json?: unknown) {
  return new Promise<{ status: number; body: string; edge?: string }>((resolve, reject) => {
    const body = json === undefined ? undefined : JSON.stringify(json);
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        headers: { host, authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {}) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode!, body: text, edge: res.headers["x-workspace-edge"] as string | undefined }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("the API's hosts without PUBLIC_URL (the documented default)", () => {
  const s = useSelfHostedServer("apihosts_default", { RUNNER: "off" });
  const port = () => s.port();

  it("answers the API on its loopback names only; any other Host gets the edge's 404, bearer token and all", async () => {
    for (const host of [`127.0.0.1:${port()}`, `localhost:${port()}`]) {
      const me = await call(port(), host, "GET", "/api/me");
      expect(me.status, host).toBe(200);
    }
    // The attacker's chosen name is not the API's: the token sent to it reaches neither the API nor an app.
    for (const host of ["api.atk.test", `api.${SHARED_DOMAIN}`, `typo-${Date.now()}.${SHARED_DOMAIN}`]) {
      const me = await call(port(), host, "GET", "/api/me");
      expect(me.status, host).toBe(404);
      expect(me.edge, host).toBe("unknown_host");
      expect(me.body, host).not.toContain("email");
    }
    // So the takeover cannot be set up through the attacker's Host: the connect request never reaches the API.
    const created = await s.api<{ id: string }>("POST", "/api/projects", { name: `hosts-${Date.now()}` }, 201);
    const viaAttackerHost = await call(port(), "api.atk.test", "POST", `/api/projects/${created.id}/connect`, { domain: "api.atk.test" });
    expect(viaAttackerHost.edge).toBe("unknown_host");
    const project = await s.api<{ routes: { domains: unknown[] } }>("GET", `/api/projects/${created.id}`);
    expect(project.routes.domains).toEqual([]);
  });

  it("a mistyped app hostname shows the edge's 404 page, not the console's sign-in page", async () => {
    const page = await call(port(), `no-such-app.${SHARED_DOMAIN}`, "GET", "/");
    expect(page.status).toBe(404);
    expect(page.edge).toBe("unknown_host");
    expect(page.body).toContain("No app is served at this address");
    const console = await call(port(), `127.0.0.1:${port()}`, "GET", "/");
    expect(console.status).toBe(200);
  });
});

describe("the API's hosts with PUBLIC_URL and API_HOSTS", () => {
  const s = useSelfHostedServer("apihosts_config", {
    RUNNER: "off",
    PUBLIC_URL: "https://api.atk.test",
    API_HOSTS: `ops.atk.test, Admin.${SHARED_DOMAIN}.`,
  });
  const port = () => s.port();

  it("answers the API on PUBLIC_URL's host and every API_HOSTS name, in any case", async () => {
    for (const host of ["api.atk.test", "API.ATK.TEST:443", "ops.atk.test", `admin.${SHARED_DOMAIN}`]) {
      const me = await call(port(), host, "GET", "/api/me");
      expect(me.status, host).toBe(200);
    }
  });

  it("none of them can be connected as a domain, whatever Host the connect request used", async () => {
    const created = await s.api<{ id: string }>("POST", "/api/projects", { name: `take-${Date.now()}` }, 201);
    for (const via of ["ops.atk.test", "api.atk.test", `127.0.0.1:${port()}`]) {
      for (const domain of ["api.atk.test", "OPS.atk.test", `admin.${SHARED_DOMAIN}`]) {
        const res = await call(port(), via, "POST", `/api/projects/${created.id}/connect`, { domain });
        expect(res.status, `${domain} via ${via}`).toBe(400);
        expect(res.body, `${domain} via ${via}`).toContain("domain");
      }
    }
    const project = await s.api<{ routes: { domains: unknown[] } }>("GET", `/api/projects/${created.id}`);
    expect(project.routes.domains).toEqual([]);
  });

  it("nor become a free route: a project named after an API name under SHARED_DOMAIN gets another slug", async () => {
    const project = await s.api<{ slug: string }>("POST", "/api/projects", { name: "Admin" }, 201);
    expect(project.slug).not.toBe("admin");
    expect(project.slug.startsWith("admin-")).toBe(true);
  });
});

describe("the API's names from configuration", () => {
  it("PUBLIC_URL's host and API_HOSTS, lower-cased; a malformed API_HOSTS entry is refused naming the setting", () => {
    expect(configuredApiHosts("https://API.Example.com:8443/base", " ops.example.com ,Edge.Example.com.")).toEqual([
      "api.example.com",
      "ops.example.com",
      "edge.example.com",
    ]);
    for (const bad of ["https://x.example.com", "x.example.com:80", "a/b", "*.example.com", "-x.example"]) {
      expect(() => configuredApiHosts(undefined, bad), bad).toThrow(/API_HOSTS/);
    }
    expect(() => loadNodeConfig({ API_HOSTS: "http://nope" })).toThrow(/API_HOSTS/);
  });

  it("the loopback names always, the bound address, every interface's address on a wildcard bind", () => {
    expect(apiHostnames({ host: "127.0.0.1", apiHosts: [] }).sort()).toEqual(["127.0.0.1", "[::1]", "localhost"]);
    expect(apiHostnames({ host: "10.1.2.3", apiHosts: ["api.example.com"] })).toEqual(expect.arrayContaining(["10.1.2.3", "api.example.com", "localhost"]));
    expect(apiHostnames({ host: "::", apiHosts: [] })).toEqual(expect.arrayContaining(["127.0.0.1", "[::1]"]));
  });

  it("the start line warns when the API is reachable from other machines without PUBLIC_URL", () => {
    expect(apiHostsWarning({ host: "0.0.0.0", apiHosts: [] })).toMatch(/PUBLIC_URL/);
    expect(apiHostsWarning({ host: "127.0.0.1", apiHosts: [] })).toBeUndefined();
    expect(apiHostsWarning({ host: "0.0.0.0", publicUrl: "https://api.example.com", apiHosts: ["api.example.com"] })).toBeUndefined();
  });
});
