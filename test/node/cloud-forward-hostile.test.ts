/**
 * Forwarding against a hostile or compromised "cloud" (a loopback server playing one):
 * the path sent to the cloud is the matched route's, however the caller encoded the id;
 * an answer the cloud labels HTML or script comes back as opaque bytes with nosniff and a
 * sandboxing CSP (it is served from this instance's origin, the console's); a cloud
 * listing an id that names a local project cannot take that project's routes; and the
 * link's URL goes through the outbound guard (plain http only to loopback).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forwardedPath } from "../../functions/cloud/service";
import { expectProblem, expectStatus, type Member, seedMember, seedTenant, useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectHelpers } from "../support/projects";

const sh = useHarness(pgliteHarness);

interface FakeCloud {
  url: string;
  calls: string[];
  /** Projects the fake cloud lists in its first page. */
  listed: unknown[];
  close(): Promise<void>;
}

async function startFakeCloud(): Promise<FakeCloud> {
  const calls: string[] = [];
  const listed: unknown[] = [];
  const server: Server = createServer((req, res) => {
    calls.push(`${req.method} ${req.url}`);
    res.setHeader("content-type", "application/json");
    if (req.url === "/api/me") return res.end(JSON.stringify({ activeOrganizationId: "org_c", organizations: [{ id: "org_c", name: "C" }] }));
    if (req.url?.startsWith("/api/projects?")) return res.end(JSON.stringify({ items: listed, nextCursor: null }));
    if (req.url?.endsWith("/logs")) {
      res.setHeader("content-type", "text/html");
      return res.end("<script>fetch('/api/tokens',{method:'POST'})</script>");
    }
    if (req.method === "DELETE" && req.url?.includes("/domains/")) {
      res.statusCode = 404;
      res.setHeader("content-type", "application/problem+json");
      return res.end(JSON.stringify({ type: "urn:x", title: "Not Found", status: 404, detail: "Domain not found" }));
    }
    res.end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    listed,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

let cloud: FakeCloud;
beforeAll(async () => {
  cloud = await startFakeCloud();
});
afterAll(async () => {
  await cloud?.close();
});

async function linkedWithCloudProject(): Promise<{ owner: Member; cloudId: string }> {
  const owner = await seedTenant(sh);
  const local = await projectHelpers(sh).create(owner);
  const view = await expectStatus<Record<string, unknown>>(await sh.request(`/api/projects/${local.id}`, { token: owner.token, org: owner.orgId }), 200);
  const cloudId = `prj_cloud${Math.random().toString(36).slice(2, 12)}`;
  cloud.listed.splice(0, cloud.listed.length, { ...view, id: cloudId, name: "cloud one", location: "cloud" });
  await expectStatus(
    await sh.request("/api/cloud/link", {
      method: "PUT",
      token: owner.token,
      org: owner.orgId,
      json: { apiUrl: cloud.url, token: `wsp_${"a".repeat(40)}`, organizationId: "org_c" },
    }),
    200,
  );
  await expectStatus(await sh.request("/api/projects/home", { token: owner.token, org: owner.orgId }), 200);
  return { owner, cloudId };
}

describe("the path sent to the cloud", () => {
  it("is built from the matched route and its decoded parameters", () => {
    expect(forwardedPath("/api/projects/:id/domains/:domain", (n) => (n === "id" ? "prj_c" : "a.example.com"))).toBe(
      "api/projects/prj_c/domains/a.example.com",
    );
    expect(forwardedPath("/api/projects/:id", () => "prj/../x")).toBe("api/projects/prj%2F..%2Fx");
  });

  it("a percent-encoded id on a sub-route reaches that sub-route, never the project itself (a member cannot delete the project)", async () => {
    const { owner, cloudId } = await linkedWithCloudProject();
    const member = await seedMember(sh, owner.orgId, "member");
    await expectProblem(await sh.request(`/api/projects/${cloudId}`, { method: "DELETE", token: member.token, org: member.orgId }), 403);
    const before = cloud.calls.length;
    const encoded = `%70${cloudId.slice(1)}`;
    const res = await sh.request(`/api/projects/${encoded}/domains/example.com`, { method: "DELETE", token: member.token, org: member.orgId });
    expect(res.headers.get("x-project-location")).toBe("cloud");
    await expectProblem(res, 404);
    expect(cloud.calls.slice(before)).toContain(`DELETE /api/projects/${cloudId}/domains/example.com`);
    expect(cloud.calls.slice(before)).not.toContain(`DELETE /api/projects/${cloudId}`);
  });
});

describe("what the cloud answers", () => {
  it("an HTML answer comes back as opaque bytes, with nosniff and a sandboxing CSP", async () => {
    const { owner, cloudId } = await linkedWithCloudProject();
    const res = await sh.request(`/api/projects/${cloudId}/logs`, { token: owner.token, org: owner.orgId });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    await res.body?.cancel();
  });

  it("a listed id that names a local project is ignored: that project's routes stay local", async () => {
    const { owner } = await linkedWithCloudProject();
    const local = await projectHelpers(sh).create(owner, { name: "mine" });
    const view = await expectStatus<Record<string, unknown>>(await sh.request(`/api/projects/${local.id}`, { token: owner.token, org: owner.orgId }), 200);
    cloud.listed.push({ ...view, name: "hijack", location: "cloud" });
    const home = await expectStatus<{ items: Array<{ id: string; location: string }> }>(
      await sh.request("/api/projects/home?limit=100", { token: owner.token, org: owner.orgId }),
      200,
    );
    expect(home.items.filter((p) => p.id === local.id)).toEqual([expect.objectContaining({ location: "self-hosted" })]);
    const res = await sh.request(`/api/projects/${local.id}`, { token: owner.token, org: owner.orgId });
    expect(res.headers.get("x-project-location")).toBeNull();
    expect((await expectStatus<{ name: string }>(res, 200)).name).toBe("mine");
  });
});

describe("the link's URL", () => {
  it("must be https unless it names this machine", async () => {
    const owner = await seedTenant(sh);
    const res = await sh.request("/api/cloud/link", {
      method: "PUT",
      token: owner.token,
      org: owner.orgId,
      json: { apiUrl: "http://cloud.example.com", token: `wsp_${"a".repeat(40)}` },
    });
    const problem = await expectProblem(res, 400);
    expect(problem.field).toBe("apiUrl");
    expect(problem.detail).toMatch(/must be https/);
  });

  it("a private address is refused by the outbound guard when OUTBOUND_ALLOW_PRIVATE is off", async () => {
    const { useGuardedCloudTransport } = await import("../../functions/cloud/transport");
    const { verifyCloudToken } = await import("../../functions/cloud/link-service");
    useGuardedCloudTransport({ allowPrivate: false });
    try {
      const refused = await verifyCloudToken(cloud.url, `wsp_${"a".repeat(40)}`).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(refused?.message).toMatch(/refused/);
      expect(cloud.calls.filter((c) => c === "GET /api/me").length).toBeGreaterThanOrEqual(0);
    } finally {
      useGuardedCloudTransport({ allowPrivate: true });
    }
  });
});
