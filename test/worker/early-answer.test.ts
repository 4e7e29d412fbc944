/**
 * Early answers inside workerd (functions/worker-early-answer.ts): a body over the limit
 * of the public POST /api/invitations/accept gets its 413 problem+json before the body is
 * sent to its end, and the Worker keeps reading (and discarding) the rest within its
 * bounds before the answer ends. The requests go through the Worker entry in-process; the
 * socket-level half (no reset, the connection reused) is test/node/worker-early-answer.test.ts.
 * The 413 is answered before any database query: the bindings need no reachable database.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createWorker } from "../../functions/worker";
import { DRAIN_BYTES } from "../../functions/worker-early-answer";
import { MAX_JSON_BODY_BYTES } from "../../shared/http/json-body";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const MiB = 1024 * 1024;
const CHUNK = 64 * 1024;
const bindings = { ...env, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", SECRET_KEYS: TEST_SECRET_KEYS };

/** A request body of `total` bytes in 64 KiB chunks; it stops after `holdAt` bytes until `release()`. */
function uploadBody(total: number, holdAt = Number.POSITIVE_INFINITY) {
  const chunk = new Uint8Array(CHUNK).fill(0x20);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const state = { pulled: 0, cancelled: false, ended: false };
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (state.pulled >= holdAt) await held;
      if (state.pulled >= total) {
        state.ended = true;
        return controller.close();
      }
      state.pulled += CHUNK;
      controller.enqueue(chunk);
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state, release };
}

function accept(body: ReadableStream<Uint8Array>, headers: Record<string, string> = {}) {
  return new Request("http://worker.test/api/invitations/accept", { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
}

/** The first chunk of the answer's body, read while the request body may still be unsent. */
async function firstChunk(res: Response): Promise<{ text: string; reader: ReadableStreamDefaultReader<Uint8Array> }> {
  const reader = res.body!.getReader();
  const { value } = await reader.read();
  return { text: new TextDecoder().decode(value), reader };
}

async function rest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += new TextDecoder().decode(value);
  }
}

function expectLimitProblem(text: string) {
  const problem = JSON.parse(text) as { status: number; title: string; detail: string };
  expect(problem.status).toBe(413);
  expect(problem.title).toBe("Payload Too Large");
  expect(problem.detail).toContain(`1 MiB (${MAX_JSON_BODY_BYTES} bytes)`);
}

describe("early answers in workerd", () => {
  it("a 64 MiB chunked body: the 413 problem+json comes while the body is still held, then the rest is read to its end", async () => {
    const worker = createWorker();
    const ctx = createExecutionContext();
    const body = uploadBody(64 * MiB, 2 * MiB);
    const res = await worker.fetch(accept(body.stream), bindings as never, ctx);
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(res.headers.get("content-length")).toBeNull();
    const { text, reader } = await firstChunk(res);
    expectLimitProblem(text);
    // The client has not sent more than the held 2 MiB: the answer came first.
    expect(body.state.pulled).toBeLessThanOrEqual(2 * MiB + CHUNK);
    expect(body.state.ended).toBe(false);

    body.release();
    expect(await rest(reader)).toBe("");
    // The answer ended only once the whole body was read: the connection can carry the next request.
    expect(body.state.ended).toBe(true);
    expect(body.state.cancelled).toBe(false);
    await waitOnExecutionContext(ctx);
  });

  it("a declared Content-Length over the limit: 413 before a byte is read, then the body is read to its end", async () => {
    const worker = createWorker();
    const ctx = createExecutionContext();
    const body = uploadBody(8 * MiB, CHUNK);
    const res = await worker.fetch(accept(body.stream, { "content-length": String(8 * MiB) }), bindings as never, ctx);
    expect(res.status).toBe(413);
    const { text, reader } = await firstChunk(res);
    expectLimitProblem(text);
    expect(body.state.pulled).toBeLessThanOrEqual(2 * CHUNK);
    body.release();
    expect(await rest(reader)).toBe("");
    expect(body.state.ended).toBe(true);
    await waitOnExecutionContext(ctx);
  });

  it("stops reading after DRAIN_BYTES: the body is cancelled and the answer ends", async () => {
    const worker = createWorker();
    const ctx = createExecutionContext();
    const body = uploadBody(MAX_JSON_BODY_BYTES + DRAIN_BYTES + 16 * MiB);
    const res = await worker.fetch(accept(body.stream), bindings as never, ctx);
    expect(res.status).toBe(413);
    expectLimitProblem(await res.text());
    expect(body.state.cancelled).toBe(true);
    expect(body.state.ended).toBe(false);
    expect(body.state.pulled).toBeLessThanOrEqual(MAX_JSON_BODY_BYTES + DRAIN_BYTES + 4 * CHUNK);
    await waitOnExecutionContext(ctx);
  }, 30_000);

  it("stops waiting after the time bound: a body that stalls is cancelled and the answer ends", async () => {
    const worker = createWorker({ drain: { bytes: DRAIN_BYTES, ms: 200 } });
    const ctx = createExecutionContext();
    const body = uploadBody(64 * MiB, 2 * MiB);
    const started = Date.now();
    const res = await worker.fetch(accept(body.stream), bindings as never, ctx);
    expect(res.status).toBe(413);
    expectLimitProblem(await res.text());
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(body.state.cancelled).toBe(true);
    expect(body.state.pulled).toBeLessThanOrEqual(2 * MiB + CHUNK);
    body.release();
    await waitOnExecutionContext(ctx);
  });

  it("a body read to its end is answered as before (length declared, nothing held)", async () => {
    const worker = createWorker();
    const ctx = createExecutionContext();
    const res = await worker.fetch(accept(uploadBody(2 * CHUNK).stream), bindings as never, ctx);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(((await res.json()) as { detail: string }).detail).toContain("JSON");
    await waitOnExecutionContext(ctx);
  });
});
