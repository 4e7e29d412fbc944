/**
 * Org scoping of every per-project route, read from the OpenAPI document: a
 * foreign organization's project and a deleted project answer the same 404 as an
 * id that never existed, and change nothing.
 */
import { describe, expect, it } from "vitest";
import { newId } from "../../../shared/ids";
import { storedIn, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

/** A valid request per per-project operation (and valid values of its other path parameters), so validation cannot answer before the lookup. */
const VALID: Record<string, { body?: unknown; query?: string; params?: Record<string, string> }> = {
  "get /api/projects/{id}": {},
  "patch /api/projects/{id}": { body: { name: "renamed" } },
  "delete /api/projects/{id}": {},
  "get /api/projects/{id}/info": {},
  "get /api/projects/{id}/deletion-preview": {},
  "get /api/projects/{id}/environments": { query: "?limit=5" },
  "post /api/projects/{id}/environments": { body: { name: "pr-1", branch: "main" } },
  "patch /api/projects/{id}/environments/{name}": { body: { autoRollback: false }, params: { name: "production" } },
  "post /api/projects/{id}/options": { body: { installCommand: "npm ci" } },
  "post /api/projects/{id}/enable": {},
  "post /api/projects/{id}/disable": {},
  "post /api/projects/{id}/routing/retry": {},
  "get /api/projects/{id}/env": { query: "?environment=production" },
  "patch /api/projects/{id}/env": { body: { upserts: [{ key: "A", value: "1", isSecret: true }], deletes: ["B"] } },
  "get /api/projects/{id}/clone-token": {},
  "patch /api/projects/{id}/clone-token": { body: { token: "ghp_scoping" } },
  "post /api/projects/{id}/export": {},
  "get /api/projects/{id}/resources": {},
  "patch /api/projects/{id}/resources": { body: { port: 8080 } },
  "post /api/projects/{id}/resources": { body: { production: { cpuCores: 2 } } },
  "post /api/projects/{id}/sleep-mode": { body: { sleepMode: "always_on" } },
  "get /api/projects/{id}/deployments": { query: "?limit=5" },
  "post /api/projects/{id}/deployment-session": {},
  "post /api/projects/{id}/connect": { body: { domain: "scoping.example.com" } },
  "get /api/projects/{id}/domains": {},
  "delete /api/projects/{id}/domains/{domain}": {},
  "post /api/projects/{id}/git/link": { body: { provider: "gitea", owner: "acme", repo: "site" } },
  "get /api/projects/{id}/git": {},
  "get /api/projects/{id}/branches": { query: "?limit=5&q=main" },
  "post /api/projects/{id}/branch": { body: { branch: "main" } },
  "get /api/projects/{id}/commit-status": {},
  "post /api/projects/{id}/auto-deploy": { body: { enabled: true } },
  "post /api/projects/{id}/webhook-domain": { body: { domain: "hooks.example.com" } },
  "get /api/projects/{id}/services": {},
  "get /api/projects/{id}/logs": { query: "?limit=5" },
  "get /api/projects/{id}/logs/stream": {},
  "get /api/projects/{id}/server-logs/recent": { query: "?limit=5" },
  "get /api/projects/{id}/server-logs/stream-token": {},
  "get /api/projects/{id}/server-logs/stream": {},
  "get /api/projects/{id}/route-rules": {},
  "post /api/projects/{id}/route-rules": { body: { kind: "ban", cidr: "203.0.113.1" } },
  "patch /api/projects/{id}/route-rules/{ruleId}": { body: { enabled: false } },
  "delete /api/projects/{id}/route-rules/{ruleId}": {},
  "post /api/projects/{id}/transfer/to-cloud": {},
  "post /api/projects/{id}/transfer/to-self-hosted": {},
};

/** Routes only the self-hosted adapter mounts (on the Worker they are unknown routes). */
const SELF_HOSTED_ONLY = new Set(Object.keys(VALID).filter((op) => op.includes("/route-rules") || op.includes("/transfer/")));

const METHODS = ["get", "put", "post", "patch", "delete"] as const;

const h = useRuntimeHarness();
const { create, get } = projectHelpers(h);

async function perProjectOperations() {
  const doc = await expectStatus(await h.request("/api/openapi.json"), 200);
  const ops: string[] = [];
  for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    if (!path.startsWith("/api/projects/{id}")) continue;
    for (const method of METHODS) if (item[method]) ops.push(`${method} ${path}`);
  }
  return ops.sort();
}

/** The 404 problem without its per-request id. */
async function notFoundBody(res: Response, label: string) {
  const text = await res.text();
  expect(res.status, `${label}: ${text}`).toBe(404);
  expect(res.headers.get("content-type"), label).toMatch(/^application\/problem\+json/);
  const { requestId, ...rest } = JSON.parse(text);
  expect(requestId, label).toMatch(/^req_/);
  return JSON.stringify(rest);
}

describe("projects: org scoping", () => {
  it("every per-project route of the OpenAPI document is covered here", async () => {
    const expected = Object.keys(VALID).filter((op) => h.runtime !== "worker" || !SELF_HOSTED_ONLY.has(op));
    expect(await perProjectOperations()).toEqual(expected.sort());
  });

  it("a foreign organization's or a deleted project answers 404 identical to an unknown id, on every route", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const foreign = await create(other);
    const deleted = await create(t);
    await expectStatus(await h.request(`/api/projects/${deleted.id}`, { method: "DELETE", token: t.token }), 200);
    const foreignBefore = await get(other, foreign.id);
    const ids = { unknown: newId("prj"), foreign: foreign.id, deleted: deleted.id, garbage: "no such id", nul: "prj%00x", long: "p".repeat(2000) };

    const failures: string[] = [];
    for (const op of await perProjectOperations()) {
      const [method, path] = op.split(" ") as [string, string];
      const valid = VALID[op]!;
      const bodies = new Set<string>();
      for (const [kind, id] of Object.entries(ids)) {
        const label = `${op} (${kind})`;
        try {
          let url = path.replace("{id}", kind === "nul" ? id : encodeURIComponent(id));
          for (const [name, value] of Object.entries(valid.params ?? {})) url = url.replace(`{${name}}`, value);
          const res = await h.request(url + (valid.query ?? ""), {
            method: method.toUpperCase(),
            token: t.token,
            json: valid.body,
          });
          bodies.add(await notFoundBody(res, label));
        } catch (e) {
          failures.push(e instanceof Error ? e.message : String(e));
        }
      }
      if (bodies.size > 1) failures.push(`${op}: different 404 bodies ${[...bodies].join(" | ")}`);
    }
    expect(failures).toEqual([]);

    // Nothing happened to the foreign project, and nothing was stored for the missing ones.
    expect(await get(other, foreign.id)).toEqual(foreignBefore);
    expect(await storedIn(h, "ghp_scoping")).toEqual([]);
    expect(await storedIn(h, "scoping.example.com")).toEqual([]);
    expect(await storedIn(h, `"project_id":"${deleted.id}"`)).toEqual([]);
  });

  it("a project is found through the organization in X-Organization-Id only", async () => {
    const t = await seedTenant(h);
    const second = await expectStatus(await h.request("/api/orgs", { token: t.token, json: { name: "second" } }), 201);
    const p = await create(t);
    await expectStatus(await h.request(`/api/projects/${p.id}`, { token: t.token, org: t.orgId }), 200);
    await expectProblem(await h.request(`/api/projects/${p.id}`, { token: t.token, org: second.id }), 404);
    const inSecond = await expectStatus(await h.request("/api/projects", { token: t.token, org: second.id, json: { name: "two" } }), 201);
    expect((await expectStatus(await h.request("/api/projects", { token: t.token, org: second.id }), 200)).items.map((x: { id: string }) => x.id)).toEqual([
      inSecond.id,
    ]);
    expect((await expectStatus(await h.request("/api/projects", { token: t.token }), 200)).items.map((x: { id: string }) => x.id)).toEqual([p.id]);
  });

  it("list cursors that match nothing, or are odd, answer an empty page (never 500)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    for (const path of [
      "/api/projects",
      "/api/projects/home",
      `/api/projects/${p.id}/environments`,
      `/api/projects/${p.id}/env`,
      `/api/projects/${p.id}/deployments`,
    ]) {
      for (const cursor of ["zzzz", "%00", "%E2%80%A2", "'"]) {
        const res = await h.request(`${path}?cursor=${cursor}`, { token: t.token });
        expect(res.status, `${path} cursor ${cursor}: ${await res.clone().text()}`).toBeLessThan(500);
      }
    }
  });
});
