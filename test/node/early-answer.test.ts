/**
 * Answers sent before the request body was read (413 and the like) on the
 * self-hosted HTTP server: the answer says `Connection: close`, the client can
 * read it while it is still sending, and its next request (Node's fetch reuses
 * connections; curl with --next) succeeds. First on the bare server layer with a
 * small limit, then through the relay's 300 MiB limit.
 */
import { execFile } from "node:child_process";
import { connect } from "node:net";
import { closeSync, openSync, readFileSync, ftruncateSync } from "node:fs";
import { join } from "node:path";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { bindHttpServer, type BoundServer } from "../../functions/self-hosted/http-server";
import { startSelfHosted } from "../../functions/self-hosted/start";
import { MAX_UPLOAD_BYTES } from "../../shared/storage/limits";
import { useCleanups } from "../support/cleanups";

const { cleanups, tempDir } = useCleanups("ws-early-");

/** A sparse file of `size` zero bytes (costs no disk). */
function sparseFile(size: number): string {
  const path = join(tempDir(), "body.bin");
  const fd = openSync(path, "w");
  ftruncateSync(fd, size);
  closeSync(fd);
  return path;
}

const LIMIT = 64 * 1024;

/** The server layer with a tiny app: POST /limited reads at most LIMIT bytes, else answers 413 at once. */
async function smallServer(): Promise<{ url: string; bound: BoundServer }> {
  const app = new Hono();
  app.post("/limited", async (c) => {
    const declared = Number(c.req.header("content-length") ?? "0");
    if (declared > LIMIT) return c.json({ status: 413, detail: "declared too large" }, 413);
    const reader = c.req.raw.body!.getReader();
    let seen = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      seen += value.length;
      if (seen > LIMIT) {
        reader.releaseLock();
        return c.json({ status: 413, detail: "too large" }, 413);
      }
    }
    return c.json({ seen }, 200);
  });
  app.get("/ok", (c) => c.json({ ok: true }));
  const bound = await bindHttpServer({ port: 0, host: "127.0.0.1" });
  bound.serve(app.fetch);
  cleanups.push(() => bound.close());
  return { url: `http://127.0.0.1:${bound.port}`, bound };
}

/** An endless-ish stream body (chunked): `total` bytes in 64 KiB chunks. */
function streamBody(total: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(64 * 1024);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= total) return controller.close();
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
}

/**
 * A raw client that declares a 400 MiB body (or chunked), sends 64 KiB every 10 ms
 * for `ms`, and reads nothing until then, as a busy client does. A server that
 * closes with unread bytes resets the connection and the answer is lost.
 */
function slowClient(port: number, path: string, framing: "content-length" | "chunked", ms: number, headers = ""): Promise<{ answer: string; error: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    let error = "";
    socket.pause();
    socket.on("data", (d) => (answer += d));
    socket.on("error", (e) => (error = e.message));
    const framingHeader = framing === "chunked" ? "Transfer-Encoding: chunked" : `Content-Length: ${400 * 1024 * 1024}`;
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}${framingHeader}\r\n\r\n`);
    const piece = Buffer.alloc(64 * 1024);
    const framed = framing === "chunked" ? Buffer.concat([Buffer.from("10000\r\n"), piece, Buffer.from("\r\n")]) : piece;
    const started = Date.now();
    const timer = setInterval(() => {
      if (Date.now() - started < ms) {
        if (!socket.destroyed) socket.write(framed);
        return;
      }
      clearInterval(timer);
      socket.resume();
      setTimeout(() => {
        resolve({ answer, error });
        socket.destroy();
      }, 500);
    }, 10);
  });
}

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile("curl", ["-sS", ...args], { maxBuffer: 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** `-w` output: one line per request, "<status> <connections opened>". */
const WRITE_OUT = "%{http_code} %{num_connects}\\n";

describe("early answers on the server layer", () => {
  it("Node's fetch: a chunked body over the limit gets 413 + Connection: close, and the next requests succeed", async () => {
    const { url } = await smallServer();
    // 1 MiB: the body ends just after the answer (the client then reuses the connection); 16 MiB: it does not.
    for (const size of [1, 16, 1, 1]) {
      const res = await fetch(`${url}/limited`, { method: "POST", body: streamBody(size * 1024 * 1024), duplex: "half" } as RequestInit);
      expect(res.status).toBe(413);
      expect(res.headers.get("connection")).toBe("close");
      expect((await res.json()).detail).toBe("too large");
      // The unrelated next request, right away and after the adapter's old 500 ms drop.
      expect((await fetch(`${url}/ok`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 600));
      expect((await fetch(`${url}/ok`)).status).toBe(200);
    }
  }, 60_000);

  it("a client still sending its declared body reads the 413 once it is done (lingering close)", async () => {
    const { bound } = await smallServer();
    for (const framing of ["content-length", "chunked"] as const) {
      const { answer, error } = await slowClient(bound.port, "/limited", framing, 1500);
      expect(error).toBe("");
      expect(answer).toMatch(/^HTTP\/1\.1 413 /);
      expect(answer.toLowerCase()).toContain("connection: close");
    }
  }, 30_000);

  it("an answer after the whole body was read keeps the connection alive", async () => {
    const { url } = await smallServer();
    const res = await fetch(`${url}/limited`, { method: "POST", body: "x".repeat(1000) });
    expect(res.status).toBe(200);
    expect(res.headers.get("connection")).toBe("keep-alive");
  });

  it("curl: chunked and declared bodies over the limit see the 413, and the next request on the connection succeeds", async () => {
    const { url } = await smallServer();
    const big = sparseFile(200 * 1024 * 1024);
    for (const mode of [["-H", "Transfer-Encoding: chunked"], []]) {
      const r = await curl([
        "-o",
        "/dev/null",
        "-w",
        WRITE_OUT,
        ...mode,
        "--data-binary",
        `@${big}`,
        `${url}/limited`,
        "--next",
        "-o",
        "/dev/null",
        "-w",
        WRITE_OUT,
        `${url}/ok`,
      ]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const [first, second] = r.stdout.trim().split("\n");
      expect(first!.split(" ")[0]).toBe("413");
      expect(second).toBe("200 1"); // a new connection: the first one was closed cleanly
    }
  }, 60_000);

  it("the rest of a body read in part is drained, and the connection closes cleanly when it ends", async () => {
    const { bound } = await smallServer();
    const socket = connect(bound.port, "127.0.0.1");
    let answer = "";
    let error = "";
    socket.on("data", (d) => (answer += d));
    socket.on("error", (e) => (error = e.message));
    const ended = new Promise<void>((resolve) => socket.on("end", () => resolve()));
    socket.write("POST /limited HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const chunk = `10000\r\n${"x".repeat(0x10000)}\r\n`;
    for (let i = 0; i < 128; i++) socket.write(chunk); // 8 MiB, far more than the socket buffers hold
    socket.end("0\r\n\r\n");
    const started = Date.now();
    await ended;
    expect(Date.now() - started).toBeLessThan(3000); // the body's end, not the 5 s bound
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(error).toBe("");
  }, 30_000);

  it("the lingering read is bounded in bytes and in time", async () => {
    const app = new Hono().post("/limited", (c) => c.json({ detail: "too large" }, 413));
    const bound = await bindHttpServer({ port: 0, host: "127.0.0.1", linger: { ms: 1000, bytes: 1024 * 1024 } });
    bound.serve(app.fetch);
    cleanups.push(() => bound.close());

    // Bytes: a client that never stops sending (and reads as it goes) is cut off after ~1 MiB more.
    const started = Date.now();
    const socket = connect(bound.port, "127.0.0.1");
    let answer = "";
    socket.on("data", (d) => (answer += d));
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.on("error", () => {});
    socket.write("POST /limited HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const chunk = `10000\r\n${"x".repeat(0x10000)}\r\n`;
    const pump = () => {
      while (!socket.destroyed && socket.write(chunk));
      if (!socket.destroyed) socket.once("drain", pump);
    };
    pump();
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(Date.now() - started).toBeLessThan(900);

    // Time: a slow sender is cut off after about a second, not when it stops.
    const slow = await slowClient(bound.port, "/limited", "content-length", 3000);
    expect(slow.error).toMatch(/ECONNRESET|EPIPE/);
  }, 30_000);

  it("answers 503 until the app is attached, and reports a taken port clearly", async () => {
    const bound = await bindHttpServer({ port: 0, host: "127.0.0.1" });
    cleanups.push(() => bound.close());
    const res = await fetch(`http://127.0.0.1:${bound.port}/api/me`);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    await expect(bindHttpServer({ port: bound.port, host: "127.0.0.1" })).rejects.toThrow(`Port ${bound.port} is already in use`);
  });
});

describe("early answers from the relay (300 MiB limit)", () => {
  async function start() {
    const dir = tempDir();
    const server = await startSelfHosted(loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir }), () => {});
    cleanups.push(() => server.close());
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    const res = await fetch(`${server.url}/api/projects/folder/session`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}",
    });
    const { absoluteUrl } = (await res.json()) as { absoluteUrl: string };
    return { url: server.url, token, absoluteUrl };
  }

  it("curl: a Content-Length over 300 MiB sees the 413 while still sending, and the next request succeeds", async () => {
    const { url, token, absoluteUrl } = await start();
    const big = sparseFile(MAX_UPLOAD_BYTES + 1024 * 1024);
    const r = await curl([
      ...["-o", "/dev/null", "-w", WRITE_OUT, "-H", `authorization: Bearer ${token}`, "-H", "content-type: application/gzip"],
      ...["--data-binary", `@${big}`, absoluteUrl],
      ...["--next", "-o", "/dev/null", "-w", WRITE_OUT, "-H", `authorization: Bearer ${token}`, `${url}/api/me`],
    ]);
    expect(r.stderr).toBe("");
    const [first, second] = r.stdout.trim().split("\n");
    expect(first!.split(" ")[0]).toBe("413");
    expect(second!.split(" ")[0]).toBe("200");
  }, 60_000);

  it("a slow client declaring more than 300 MiB reads the 413 after it stops sending", async () => {
    const { url, token, absoluteUrl } = await start();
    const { port } = new URL(url);
    const slow = await slowClient(
      Number(port),
      new URL(absoluteUrl).pathname,
      "content-length",
      1500,
      `Authorization: Bearer ${token}\r\nContent-Type: application/gzip\r\n`,
    );
    expect(slow.error).toBe("");
    expect(slow.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(slow.answer).toMatch(/300 MiB/);
  }, 60_000);

  it("Node's fetch: chunked over 300 MiB gets the 413, and the next request on the same dispatcher succeeds", async () => {
    const { url, token, absoluteUrl } = await start();
    const res = await fetch(absoluteUrl, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/gzip" },
      body: streamBody(MAX_UPLOAD_BYTES + 1024 * 1024),
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(res.headers.get("connection")).toBe("close");
    expect((await res.json()).detail).toMatch(/300 MiB/);
    expect((await fetch(`${url}/api/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 700));
    expect((await fetch(`${url}/api/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  }, 120_000);
});
