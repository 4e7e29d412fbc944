/**
 * The permission matrix, driven by the OpenAPI document: every operation's
 * `x-permission` is enforced by the guard for every kind of caller.
 */
import { describe, expect, it } from "vitest";
import { ROLE_TAGS, TAGS, type Tag } from "../../shared/auth/permissions";
import { newId } from "../../shared/ids";
import { expectProblem, expectStatus, seedMember, seedTenant } from "../support/harness";
import { useRuntimeHarness } from "../support/runtime";

const METHODS = ["get", "put", "post", "patch", "delete"] as const;
const WITH_BODY = new Set<string>(["put", "post", "patch"]);

interface Operation {
  method: (typeof METHODS)[number];
  path: string;
  permission: string;
  security: unknown;
}

/** The health probes: public, at the root where load balancers look for them, and blind to credentials (functions/operations/health.ts). */
const atRoot = (op: Operation) => (op.path === "/healthz" || op.path === "/readyz") && op.permission === "public";

const isTag = (p: string): p is Tag => (TAGS as readonly string[]).includes(p);
const label = (op: Operation) => `${op.method.toUpperCase()} ${op.path} (${op.permission})`;

/** A well-formed bearer that no token hashes to. */
const garbageToken = () => `wsp_${newId("garbage").replace(/_/g, "-")}${"Z".repeat(12)}`;

const h = useRuntimeHarness();
describe("permissions", () => {
  let cached: Promise<Operation[]> | undefined;
  const operations = () =>
    (cached ??= (async () => {
      const doc = await expectStatus(await h.request("/api/openapi.json"), 200);
      const ops: Operation[] = [];
      for (const [path, item] of Object.entries<Record<string, Record<string, unknown>>>(doc.paths ?? {})) {
        for (const method of METHODS) {
          const op = item[method];
          if (op) ops.push({ method, path, permission: op["x-permission"] as string, security: op.security });
        }
      }
      return ops;
    })());

  const call = (op: Operation, orgId: string, init: { token?: string; headers?: Record<string, string> } = {}) => {
    const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => (name === "orgId" ? orgId : "x"));
    return h.request(path, {
      method: op.method.toUpperCase(),
      ...init,
      ...(WITH_BODY.has(op.method) ? { json: {} } : {}),
    });
  };

  /** Runs `check` on every operation and reports all mismatches at once. */
  async function each(ops: Operation[], check: (op: Operation) => Promise<string | null>) {
    const failures: string[] = [];
    for (const op of ops) {
      try {
        const failure = await check(op);
        if (failure) failures.push(`${label(op)}: ${failure}`);
      } catch (e) {
        failures.push(`${label(op)}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    expect(failures).toEqual([]);
  }

  const expect403 = async (res: Response) => {
    await expectProblem(res, 403);
    return null;
  };

  it("every operation under /api declares its x-permission", async () => {
    const ops = await operations();
    expect(ops.length).toBeGreaterThan(0);
    // Besides /api, only the probes.
    const bad = ops.filter(
      (op) => !(op.path.startsWith("/api/") || atRoot(op)) || !(isTag(op.permission) || ["authenticated", "public", "runner"].includes(op.permission)),
    );
    expect(bad.map(label)).toEqual([]);

    const index = new Map(ops.map((op) => [`${op.method} ${op.path}`, op.permission]));
    const expected: Record<string, string> = {
      "get /api/settings": "settings:read",
      "put /api/settings": "settings:write",
      "patch /api/settings/build-mode": "settings:write",
      "patch /api/settings/deploy-defaults": "settings:write",
      "patch /api/settings/clone-credentials": "settings:write",
      "patch /api/settings/clone-strategy-preference": "settings:write",
      "patch /api/settings/forward-git": "settings:write",
      "get /api/servers": "settings:read",
      "post /api/servers": "org:admin",
      "get /api/servers/{id}": "settings:read",
      "patch /api/servers/{id}": "org:admin",
      "delete /api/servers/{id}": "org:admin",
      "post /api/runner/heartbeat": "runner",
      "post /api/runner/claim": "runner",
      "get /api/runner/serving": "runner",
      "post /api/runner/forget-ports": "runner",
      "get /api/runner/jobs/{id}": "runner",
      "post /api/runner/jobs/{id}/renew": "runner",
      "post /api/runner/jobs/{id}/advance": "runner",
      "post /api/runner/jobs/{id}/ready": "runner",
      "post /api/runner/jobs/{id}/release": "runner",
      "post /api/runner/jobs/{id}/logs": "runner",
      "get /api/runner/jobs/{id}/clone-credential": "runner",
      "get /api/runner/jobs/{id}/source": "runner",
      "get /api/runner/jobs/{id}/source/archive": "runner",
      "put /api/runner/jobs/{id}/serving": "runner",
      "delete /api/runner/jobs/{id}/serving": "runner",
      "post /api/runner/jobs/{id}/down": "runner",
      "post /api/runner/jobs/{id}/crashed": "runner",
      "post /api/runner/jobs/{id}/asleep": "runner",
      "post /api/runner/jobs/{id}/events": "runner",
      "delete /api/runner/jobs/{id}/source": "runner",
      "put /api/runner/jobs/{id}/work-dir-bytes": "runner",
      "post /api/runner/jobs/{id}/pruned": "runner",
      "get /api/runner/jobs/{id}/rollback-target": "runner",
      "post /api/runner/jobs/{id}/promote": "runner",
      "get /api/runner/environments/{id}": "runner",
      "get /api/runner/environments/{id}/current": "runner",
      "get /api/runner/environments/{id}/superseded": "runner",
      "get /api/runner/projects/{id}/sandbox-uid": "runner",
      "post /api/runner/projects/alive": "runner",
      "post /api/runner/wake-always-on": "runner",
      "post /api/runner/deployments/still-serving": "runner",
      "post /api/runner/deployments/idle": "runner",
      "post /api/runner/deployments/statuses": "runner",
      "get /api/me": "authenticated",
      "post /api/orgs": "authenticated",
      "get /api/orgs/{orgId}/members": "authenticated",
      "patch /api/orgs/{orgId}/members/{userId}": "org:admin",
      "delete /api/orgs/{orgId}/members/{userId}": "org:admin",
      "post /api/orgs/{orgId}/invitations": "org:admin",
      "get /api/orgs/{orgId}/audit": "org:admin",
      "post /api/invitations/accept": "public",
      "post /api/tokens": "token:manage",
      "get /api/tokens": "token:manage",
      "delete /api/tokens/{id}": "token:manage",
    };
    for (const [key, permission] of Object.entries(expected)) expect(index.get(key), key).toBe(permission);
    // Every tag guards at least one route, so the matrix below covers each of them.
    const used = new Set(ops.map((op) => op.permission));
    expect(TAGS.filter((tag) => !used.has(tag))).toEqual([]);

    // The security requirement agrees with the permission.
    for (const op of ops) {
      if (op.permission === "public") expect(op.security, label(op)).toEqual([]);
      else expect(op.security, label(op)).toEqual([{ bearerAuth: [] }]);
    }
  });

  it("every non-public operation answers 401 without an Authorization header", async () => {
    const t = await seedTenant(h);
    const ops = (await operations()).filter((op) => op.permission !== "public");
    expect(ops.length).toBeGreaterThan(0);
    await each(ops, async (op) => {
      await expectProblem(await call(op, t.orgId), 401);
      return null;
    });
  });

  it("every operation answers 401 to a garbage bearer token (the probes ignore credentials)", async () => {
    const t = await seedTenant(h);
    const ops = (await operations()).filter((op) => !atRoot(op));
    await each(ops, async (op) => {
      await expectProblem(await call(op, t.orgId, { token: garbageToken() }), 401);
      await expectProblem(await call(op, t.orgId, { headers: { authorization: "Bearer not a token" } }), 401);
      return null;
    });
  });

  it("an owner's token scoped to every tag but the route's answers 403", async () => {
    const t = await seedTenant(h);
    const ops = (await operations()).filter((op) => isTag(op.permission));
    expect(ops.length).toBeGreaterThan(0);
    const tokens = new Map<string, string>();
    for (const tag of TAGS) {
      const { token } = await expectStatus(
        await h.request("/api/tokens", { token: t.token, json: { name: `all but ${tag}`, scopes: TAGS.filter((x) => x !== tag) } }),
        201,
      );
      tokens.set(tag, token);
    }
    await each(ops, async (op) => expect403(await call(op, t.orgId, { token: tokens.get(op.permission)! })));
  });

  it("an owner's unscoped token passes every guard but the runner protocol's (no 401, 403 or 500)", async () => {
    const t = await seedTenant(h);
    const ops = (await operations()).filter((op) => op.permission !== "public" && op.permission !== "runner");
    await each(ops, async (op) => {
      const res = await call(op, t.orgId, { token: t.token });
      const text = await res.text();
      if ([401, 403].includes(res.status) || res.status >= 500) return `got ${res.status}: ${text}`;
      return null;
    });
  });

  it("a viewer gets 403 on every route whose tag the viewer role lacks", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    const ops = (await operations()).filter((op) => isTag(op.permission) && !ROLE_TAGS.viewer.includes(op.permission as Tag));
    expect(ops.length).toBeGreaterThan(0);
    await each(ops, async (op) => expect403(await call(op, t.orgId, { token: viewer.token })));
    // And passes the guard on the routes whose tag it has.
    const allowed = (await operations()).filter((op) => isTag(op.permission) && ROLE_TAGS.viewer.includes(op.permission as Tag));
    await each(allowed, async (op) => {
      const res = await call(op, t.orgId, { token: viewer.token });
      const text = await res.text();
      return [401, 403].includes(res.status) || res.status >= 500 ? `got ${res.status}: ${text}` : null;
    });
  });

  it("every role holds token:manage; a token scoped without it gets 403 on every token and session route", async () => {
    const t = await seedTenant(h);
    const ops = (await operations()).filter((op) => op.permission === "token:manage");
    expect(ops.map((op) => `${op.method} ${op.path}`).sort()).toEqual([
      "delete /api/auth/sessions/{id}",
      "delete /api/tokens/{id}",
      "get /api/auth/sessions",
      "get /api/tokens",
      "post /api/tokens",
    ]);
    for (const role of ["owner", "admin", "member", "viewer"] as const) {
      expect(ROLE_TAGS[role], role).toContain("token:manage");
      const m = role === "owner" ? t : await seedMember(h, t.orgId, role);
      await each(ops, async (op) => {
        const res = await call(op, t.orgId, { token: m.token });
        const text = await res.text();
        return [401, 403].includes(res.status) || res.status >= 500 ? `${role} got ${res.status}: ${text}` : null;
      });
      const scoped = await seedMember(h, t.orgId, role, { scopes: ROLE_TAGS[role].filter((x) => x !== "token:manage") });
      await each(ops, async (op) => expect403(await call(op, t.orgId, { token: scoped.token })));
    }
  });

  it("a member gets 403 on the project:admin, notifications:admin and org:admin routes", async () => {
    const t = await seedTenant(h);
    const member = await seedMember(h, t.orgId, "member");
    const adminOnly = ["project:admin", "notifications:admin", "org:admin"];
    const ops = (await operations()).filter((op) => adminOnly.includes(op.permission));
    expect(ops.some((op) => op.permission === "org:admin")).toBe(true);
    await each(ops, async (op) => expect403(await call(op, t.orgId, { token: member.token })));
  });

  it("a build server's runner token gets 403 on every operation but the runner protocol's, and a user's token 403 there", async () => {
    const t = await seedTenant(h);
    const { token: runnerToken } = await expectStatus(await h.request("/api/servers", { token: t.token, json: { name: "matrix" } }), 201);
    const ops = await operations();
    const runnerOps = ops.filter((op) => op.permission === "runner");
    expect(runnerOps.length).toBeGreaterThan(0);
    await each(
      ops.filter((op) => op.permission !== "runner" && !atRoot(op)),
      async (op) => {
        const problem = await expectProblem(await call(op, t.orgId, { token: runnerToken }), 403);
        return /only works on the runner protocol/.test(problem.detail) ? null : `detail: ${problem.detail}`;
      },
    );
    await each(runnerOps, async (op) => expect403(await call(op, t.orgId, { token: t.token })));
  });

  it("a non-member gets 403 on every route of another organization's path", async () => {
    const t = await seedTenant(h);
    const outsider = await seedTenant(h);
    const ops = (await operations()).filter((op) => op.path.includes("{orgId}"));
    expect(ops.length).toBeGreaterThan(0);
    await each(ops, async (op) => expect403(await call(op, t.orgId, { token: outsider.token })));
  });

  describe("unknown routes", () => {
    const strip = async (res: Response) => {
      const p = await expectProblem(res, 404);
      const { requestId, detail, ...rest } = p;
      expect(requestId).toMatch(/^req_/);
      return { rest, detail };
    };

    it("answer 404 problem+json with or without a token", async () => {
      const t = await seedTenant(h);
      const bodies = [];
      for (const [method, path] of [
        ["GET", "/api/does-not-exist"],
        ["DELETE", "/api/settings"],
      ] as const) {
        const anonymous = await strip(await h.request(path, { method }));
        const authed = await strip(await h.request(path, { method, token: t.token }));
        expect(authed).toEqual(anonymous);
        expect(anonymous.detail).toContain(path);
        bodies.push(anonymous.rest);
      }
      expect(bodies[0]).toEqual(bodies[1]);
    });
  });

  it("serves the OpenAPI document and the reference page without a token", async () => {
    const doc = await h.request("/api/openapi.json");
    expect(doc.status).toBe(200);
    expect(doc.headers.get("content-type")).toMatch(/^application\/json/);
    const body = await doc.json();
    expect(body.openapi).toMatch(/^3\.1/);

    const page = await h.request("/api/docs");
    const html = await page.text();
    expect(page.status, html.slice(0, 200)).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(html).toContain("/api/openapi.json");
  });
});
