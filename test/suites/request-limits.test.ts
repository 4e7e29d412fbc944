/**
 * Hostile JSON bodies are refused cheaply, on every route and runtime: a body
 * over the route's limit is 413 without being buffered (with or without
 * Content-Length), and nesting deeper than MAX_JSON_DEPTH is 400 before any
 * parsing, validation or storage work.
 */
import { describe, expect, it } from "vitest";
import { MAX_JSON_BODY_BYTES, MAX_JSON_DEPTH } from "../../shared/http/json-body";
import { expectProblem, expectStatus, seedTenant } from "../support/harness";
import { useRuntimeHarness } from "../support/runtime";

const JSON_HEADERS = { "content-type": "application/json" };

/** A body of `total` bytes streamed in 64 KiB chunks with no Content-Length; `pulled()` says how much the server read. */
function countedStream(total: number, fill = " ") {
  const chunk = new TextEncoder().encode(fill.repeat(64 * 1024));
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= total) return controller.close();
      const part = chunk.subarray(0, Math.min(chunk.length, total - sent));
      sent += part.length;
      controller.enqueue(part);
    },
  });
  return { stream, pulled: () => sent };
}

const nested = (depth: number, inner = "0") => "[".repeat(depth) + inner + "]".repeat(depth);

const h = useRuntimeHarness();
describe("request body limits", () => {
  it("refuses a declared Content-Length over 1 MiB with 413 on a public route", async () => {
    const body = `{"code":"${"x".repeat(MAX_JSON_BODY_BYTES)}","name":"n"}`;
    const res = await h.request("/api/invitations/accept", { method: "POST", body, headers: JSON_HEADERS });
    const problem = await expectProblem(res, 413);
    expect(problem.detail).toMatch(/1 MiB/);
  });

  it("stops reading a streamed body at the limit: 413, nothing buffered past it", async () => {
    const { stream, pulled } = countedStream(64 * 1024 * 1024);
    const res = await h.request("/api/invitations/accept", { method: "POST", body: stream, headers: JSON_HEADERS });
    await expectProblem(res, 413);
    // The server stopped pulling within a few chunks of the limit, not at 64 MiB. The Worker then
    // reads the rest and discards it before its answer ends (functions/worker-early-answer.ts; that
    // the route stopped at the limit is test/worker/early-answer.test.ts).
    if (h.runtime === "worker") expect(pulled()).toBe(64 * 1024 * 1024);
    else expect(pulled()).toBeLessThan(MAX_JSON_BODY_BYTES + 1024 * 1024);
  });

  it("applies the same limit to authenticated routes, and accepts a body just under it", async () => {
    const t = await seedTenant(h);
    const padded = (size: number) => {
      const base = JSON.stringify({ name: "limits" });
      return `${base.slice(0, -1) + " ".repeat(size - base.length)}}`;
    };
    const over = await h.request("/api/projects", { method: "POST", token: t.token, body: padded(MAX_JSON_BODY_BYTES + 1), headers: JSON_HEADERS });
    await expectProblem(over, 413);
    const list = await expectStatus<{ items: unknown[] }>(await h.request("/api/projects", { token: t.token }), 200);
    expect(list.items).toHaveLength(0);
    await expectStatus(await h.request("/api/projects", { method: "POST", token: t.token, body: padded(MAX_JSON_BODY_BYTES), headers: JSON_HEADERS }), 201);
  });

  it("lets PATCH env take up to 8 MiB (200 long values) and no more", async () => {
    const t = await seedTenant(h);
    const project = await expectStatus<{ id: string }>(await h.request("/api/projects", { token: t.token, json: { name: "big env" } }), 201);
    const upserts = Array.from({ length: 100 }, (_, i) => ({ key: `K${i}`, value: "v".repeat(32768) }));
    const ok = await h.request(`/api/projects/${project.id}/env`, { method: "PATCH", token: t.token, json: { upserts } });
    await expectStatus(ok, 200);
    const huge = `{"upserts":[],"deletes":[]${" ".repeat(8 * 1024 * 1024)}}`;
    await expectProblem(await h.request(`/api/projects/${project.id}/env`, { method: "PATCH", token: t.token, body: huge, headers: JSON_HEADERS }), 413);
  });
});

describe("request body nesting", () => {
  it(`refuses nesting deeper than ${MAX_JSON_DEPTH} with 400 naming the limit, on a public route`, async () => {
    const body = `{"code":${nested(MAX_JSON_DEPTH)},"name":"n"}`;
    const problem = await expectProblem(await h.request("/api/invitations/accept", { method: "POST", body, headers: JSON_HEADERS }), 400);
    expect(problem.detail).toContain(String(MAX_JSON_DEPTH));
    // At the limit the body is parsed and reaches validation (code must be a string).
    const atLimit = `{"code":${nested(MAX_JSON_DEPTH - 1)},"name":"n"}`;
    await expectProblem(await h.request("/api/invitations/accept", { method: "POST", body: atLimit, headers: JSON_HEADERS }), 400, "code");
  });

  it("answers a 1 MB body of nested arrays at once, with 400, not a stall or a 500", async () => {
    const depth = 500_000;
    const started = Date.now();
    const res = await h.request("/api/invitations/accept", { method: "POST", body: `{"code":${nested(depth)}}`, headers: JSON_HEADERS });
    await expectProblem(res, 400);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("refuses deep event data (it used to overflow JSON.stringify) and keeps brackets inside strings harmless", async () => {
    const t = await seedTenant(h);
    let data = "0";
    for (let i = 0; i < 5000; i++) data = `{"a":${data}}`;
    const deep = `{"category":"deploy.failed","title":"deep","data":${data}}`;
    await expectProblem(await h.request("/api/notifications/events", { method: "POST", token: t.token, body: deep, headers: JSON_HEADERS }), 400);
    // Brackets inside strings are text, not nesting.
    const res = await h.request("/api/projects", { token: t.token, json: { name: "[".repeat(90) } });
    await expectStatus(res, 201);
  });

  it("still names an unsafe value deep inside a body by its path", async () => {
    const t = await seedTenant(h);
    const res = await h.request("/api/notifications/events", {
      token: t.token,
      json: { category: "deploy.failed", title: "x", data: { a: { b: [{ c: "ok" }, { c: "bad\u0000" }] } } },
    });
    await expectProblem(res, 400, "data.a.b.1.c");
  });
});

describe("optional bodies", () => {
  it("treats an empty body with Content-Type: application/json as no body", async () => {
    const t = await seedTenant(h);
    const res = await h.request("/api/projects/folder/session", { method: "POST", token: t.token, body: "", headers: JSON_HEADERS });
    // As no body: opened on the relay; on presigned targets the no-body answer is the 400 asking for sizeBytes.
    expect(res.status < 300 || (await res.clone().json()).field === "sizeBytes", await res.text()).toBe(true);
    // A non-empty optional body still follows the limits.
    const big = await h.request("/api/projects/folder/session", {
      method: "POST",
      token: t.token,
      body: `{"name":"x"${" ".repeat(MAX_JSON_BODY_BYTES)}}`,
      headers: JSON_HEADERS,
    });
    await expectProblem(big, 413);
  });

  it("takes a request with no body and no Content-Type as no body; a body of another type is 400", async () => {
    const t = await seedTenant(h);
    const res = await h.request("/api/projects/folder/session", { method: "POST", token: t.token });
    expect(res.status < 300 || (await res.clone().json()).field === "sizeBytes", await res.text()).toBe(true);
    const text = await h.request("/api/projects/folder/session", { method: "POST", token: t.token, body: "name=x", headers: { "content-type": "text/plain" } });
    expect((await expectProblem(text, 400)).detail).toMatch(/Content-Type: application\/json/);
  });
});
