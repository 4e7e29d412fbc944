/**
 * The Worker's early 413 over real sockets (functions/worker-early-answer.ts): a 64 MiB body
 * to the public POST /api/invitations/accept, whose limit is 1 MiB, gets its 413
 * problem+json before it is sent to its end, and no reset: the answer ends once the Worker
 * has read the rest, and the same connection then carries the next request. Under workerd
 * through Miniflare (test/support/cloud-worker.ts) and under `wrangler dev`, whose proxy
 * Worker is one more workerd hop (test/support/browser.ts). Before, workerd closed the
 * connection 64 KiB or 1 s after the answer and the client, still sending, read a reset
 * after 10-14 MiB.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_JSON_BODY_BYTES } from "../../shared/http/json-body";
import { startConsoleWorker } from "../support/browser";
import { startCloudWorker } from "../support/cloud-worker";

const MiB = 1024 * 1024;
const TOTAL = 64 * MiB;
const PATH = "/api/invitations/accept";

interface RawResult {
  /** Everything read from the socket: the 413, then the answer to the next request on the same connection. */
  answer: string;
  error: string;
  /** Body bytes written when the first byte of the answer arrived. */
  sentAtAnswer: number;
}

/**
 * A raw HTTP/1.1 client: POST `TOTAL` bytes chunked (64 KiB chunks, as fast as the socket
 * takes them) while reading; once the answer has ended (its last chunk), a GET /api/me on
 * the same connection.
 */
function rawUpload(port: number): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    let error = "";
    let sent = 0;
    let sentAtAnswer = -1;
    let next = false;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ answer, error, sentAtAnswer });
    };
    const timer = setTimeout(done, 40_000);
    socket.on("data", (d) => {
      if (sentAtAnswer < 0) sentAtAnswer = sent;
      answer += d.toString("latin1");
      const ended = answer.indexOf("\r\n0\r\n\r\n");
      if (!next && ended >= 0) {
        next = true;
        socket.write("GET /api/me HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      } else if (next && /\r\n\r\nHTTP\/1\.1 \d{3}[\s\S]*\r\n\r\n[\s\S]*\}$/.test(answer)) done();
    });
    socket.on("error", (e) => {
      error = (e as NodeJS.ErrnoException).code ?? e.message;
      done();
    });
    socket.on("close", done);
    socket.write(`POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const chunk = Buffer.concat([Buffer.from("10000\r\n"), Buffer.alloc(64 * 1024, 0x20), Buffer.from("\r\n")]);
    const pump = () => {
      while (sent < TOTAL && !socket.destroyed) {
        sent += 64 * 1024;
        if (!socket.write(chunk)) return void socket.once("drain", pump);
      }
      if (!socket.destroyed) socket.write("0\r\n\r\n");
    };
    pump();
  });
}

/** The first answer's parts: status line, headers (lower case), and its body with the chunk framing removed. */
function firstAnswer(raw: string) {
  const headEnd = raw.indexOf("\r\n\r\n");
  const [statusLine, ...lines] = raw.slice(0, headEnd).split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  let rest = raw.slice(headEnd + 4);
  let body = "";
  for (;;) {
    const size = Number.parseInt(rest.slice(0, rest.indexOf("\r\n")), 16);
    rest = rest.slice(rest.indexOf("\r\n") + 2);
    if (!size) break;
    body += rest.slice(0, size);
    rest = rest.slice(size + 2);
  }
  return { statusLine, headers, body, after: rest.slice(2) };
}

function expectLimitProblem(body: string) {
  const problem = JSON.parse(body) as { status: number; title: string; detail: string };
  expect(problem).toMatchObject({ status: 413, title: "Payload Too Large" });
  expect(problem.detail).toContain(`1 MiB (${MAX_JSON_BODY_BYTES} bytes)`);
}

/** A `TOTAL`-byte stream body (Node's fetch sends it chunked). */
function streamBody(): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= TOTAL) return controller.close();
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
}

function cases(target: () => { url: string }) {
  it("a raw client sending 64 MiB chunked reads the 413 problem+json before its body is sent, then reuses the connection", async () => {
    const { url } = target();
    const { answer, error, sentAtAnswer } = await rawUpload(Number(new URL(url).port));
    expect(error).toBe("");
    const first = firstAnswer(answer);
    expect(first.statusLine).toMatch(/^HTTP\/1\.1 413 /);
    expect(first.headers["content-type"]).toBe("application/problem+json");
    expect(first.headers.connection).toBeUndefined();
    expectLimitProblem(first.body);
    // Answered first: well before the 64 MiB were written.
    expect(sentAtAnswer).toBeGreaterThan(0);
    expect(sentAtAnswer).toBeLessThan(TOTAL);
    // The body was read to its end, so the connection carries the next request.
    expect(first.after).toMatch(/^HTTP\/1\.1 401 /);
  }, 45_000);

  it("Node's fetch: 64 MiB chunked and 64 MiB with Content-Length both read the 413 problem+json", async () => {
    const { url } = target();
    const chunked = await fetch(`${url}${PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: streamBody(),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(chunked.headers.get("content-type")).toBe("application/problem+json");
    expectLimitProblem(await chunked.text());

    const declared = await fetch(`${url}${PATH}`, { method: "POST", headers: { "content-type": "application/json" }, body: new Uint8Array(TOTAL).fill(0x20) });
    expect(declared.status).toBe(413);
    expectLimitProblem(await declared.text());
  }, 45_000);
}

describe("the Worker's early 413 through Miniflare", () => {
  let cloud: Awaited<ReturnType<typeof startCloudWorker>>;
  beforeAll(async () => {
    cloud = await startCloudWorker({ databasePrefix: "early413" });
  }, 90_000);
  afterAll(async () => {
    await cloud?.stop();
  });
  cases(() => cloud);
});

describe("the Worker's early 413 under wrangler dev", () => {
  let worker: Awaited<ReturnType<typeof startConsoleWorker>>;
  beforeAll(async () => {
    worker = await startConsoleWorker("early413_dev");
  }, 90_000);
  afterAll(async () => {
    await worker?.close();
  });
  cases(() => worker);
});
