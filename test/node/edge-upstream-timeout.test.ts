/**
 * The edge's wait for an app's answer head (functions/self-hosted/edge/proxy.ts, upstreamTimeouts.headersMs,
 * watched by one timer for all requests instead of a socket timeout per request): an app that accepted the
 * connection and stays silent is answered 502; an app that answers after a pause shorter than the timeout,
 * over a pooled connection, is relayed; once the head came, a streamed body may pause for longer than the
 * timeout and still arrive whole.
 */
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { proxyHttp, upstreamTimeouts } from "../../functions/self-hosted/edge/proxy";

const HEADERS_MS = 300;
let app: Server;
let edge: Server;
let edgePort: number;
const saved = upstreamTimeouts.headersMs;

beforeAll(async () => {
  upstreamTimeouts.headersMs = HEADERS_MS;
  app = createServer((req, res) => {
    req.resume();
    if (req.url === "/silent") return; // accepted, never answered
    if (req.url === "/late") return void setTimeout(() => res.end("late"), HEADERS_MS / 2);
    // /stream: the head at once, then a pause of three timeouts before the rest.
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("first ");
    setTimeout(() => res.end("second"), HEADERS_MS * 3);
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  const appPort = (app.address() as AddressInfo).port;
  edge = createServer((req, res) => {
    void proxyHttp(req, res, appPort, req.url ?? "/", { clientAddress: "127.0.0.1", proto: "http" }, "none");
  });
  await new Promise<void>((r) => edge.listen(0, "127.0.0.1", r));
  edgePort = (edge.address() as AddressInfo).port;
});

afterAll(async () => {
  upstreamTimeouts.headersMs = saved;
  app.closeAllConnections();
  edge.closeAllConnections();
  await new Promise((r) => app.close(r));
  await new Promise((r) => edge.close(r));
});

function get(path: string): Promise<{ status: number; body: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: edgePort, path, headers: { host: "app.test" } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, ms: performance.now() - started }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("edge: waiting for the app's answer head", () => {
  it("a silent app is answered 502 once the timeout passed (within its sweep)", async () => {
    const r = await get("/silent");
    expect(r.status).toBe(502);
    expect(r.ms).toBeGreaterThanOrEqual(HEADERS_MS - 20);
    expect(r.ms).toBeLessThan(HEADERS_MS * 3);
  });

  it("an app answering within the timeout is relayed, again and again over pooled connections", async () => {
    for (let i = 0; i < 5; i++) expect(await get("/late")).toMatchObject({ status: 200, body: "late" });
  });

  it("a streamed body may pause longer than the timeout once the head came", async () => {
    expect(await get("/stream")).toMatchObject({ status: 200, body: "first second" });
  });
});
