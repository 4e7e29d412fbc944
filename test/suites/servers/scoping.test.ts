/**
 * Org scoping of every per-server route, read from the OpenAPI document: a
 * foreign organization's server and a deleted one answer the same 404 as an id
 * that never existed, and change nothing.
 */
import { describe, expect, it } from "vitest";
import { newId } from "../../../shared/ids";
import { storedIn, expectStatus, seedTenant } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

/** A valid request per per-server operation, so validation cannot answer before the lookup. */
const VALID: Record<string, { body?: unknown }> = {
  "get /api/servers/{id}": {},
  "patch /api/servers/{id}": { body: { name: "scoping-renamed", labels: ["scoping"], draining: true } },
  "delete /api/servers/{id}": {},
};

const METHODS = ["get", "put", "post", "patch", "delete"] as const;

const h = useRuntimeHarness();

async function perServerOperations() {
  const doc = await expectStatus(await h.request("/api/openapi.json"), 200);
  const ops: string[] = [];
  for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    if (!path.startsWith("/api/servers/{id}")) continue;
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

describe("build servers: org scoping", () => {
  it("every per-server route of the OpenAPI document is covered here", async () => {
    expect(await perServerOperations()).toEqual(Object.keys(VALID).sort());
  });

  it("a foreign organization's or a deleted server answers 404 identical to an unknown id, on every route", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const foreign = await expectStatus(await h.request("/api/servers", { token: other.token, json: { name: "foreign" } }), 201);
    const deleted = await expectStatus(await h.request("/api/servers", { token: t.token, json: { name: "deleted" } }), 201);
    await expectStatus(await h.request(`/api/servers/${deleted.id}`, { method: "DELETE", token: t.token }), 200);
    const foreignBefore = await expectStatus(await h.request(`/api/servers/${foreign.id}`, { token: other.token }), 200);
    const ids = { unknown: newId("srv"), foreign: foreign.id, deleted: deleted.id, garbage: "no such id", nul: "srv%00x", long: "s".repeat(2000) };

    const failures: string[] = [];
    for (const op of await perServerOperations()) {
      const [method, path] = op.split(" ") as [string, string];
      const bodies = new Set<string>();
      for (const [kind, id] of Object.entries(ids)) {
        const label = `${op} (${kind})`;
        try {
          const url = path.replace("{id}", kind === "nul" ? id : encodeURIComponent(id));
          const res = await h.request(url, { method: method.toUpperCase(), token: t.token, json: VALID[op]!.body });
          bodies.add(await notFoundBody(res, label));
        } catch (e) {
          failures.push(e instanceof Error ? e.message : String(e));
        }
      }
      if (bodies.size > 1) failures.push(`${op}: different 404 bodies ${[...bodies].join(" | ")}`);
    }
    expect(failures).toEqual([]);

    // Nothing happened to the foreign server (its token still works), and nothing was stored for the missing ones.
    expect(await expectStatus(await h.request(`/api/servers/${foreign.id}`, { token: other.token }), 200)).toEqual(foreignBefore);
    await expectStatus(await h.request("/api/runner/heartbeat", { method: "POST", token: foreign.token, json: {} }), 200);
    expect(await storedIn(h, "scoping-renamed")).toEqual([]);
  });
});
