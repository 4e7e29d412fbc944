/**
 * A build server's edge (functions/self-hosted/edge/server-edge.ts) in front of a real
 * app on loopback: only requests signed with the server's edge key, within the clock
 * window and untampered, reach the app, with the signed Host and client address; a
 * WebSocket passes; an app starting is waited for.
 */
import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { deriveEdgeKey, FORWARD_HEADERS, type ForwardFields, signForward } from "../../shared/net/edge-forward";
import { useCleanups } from "../support/cleanups";
import { type SeenRequest, startServerEdgeFixture } from "../support/server-edge-fixture";

const { cleanups } = useCleanups("server-edge-");
const TOKEN = "wsr_server_edge_test_token";

async function fixture(holdMs?: number) {
  const f = await startServerEdgeFixture(TOKEN, ["dep_a"], holdMs);
  cleanups.push(() => f.close());
  return f;
}

const fields = (over: Partial<ForwardFields> = {}): ForwardFields => ({
  method: "GET",
  target: "/hello?x=1",
  host: "shop.apps.test",
  clientAddress: "203.0.113.7",
  proto: "https",
  deploymentId: "dep_a",
  ...over,
});

function send(url: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ status: number; headers: Record<string, unknown>; text: string }>((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("server edge", () => {
  it("a signed request reaches the app with the signed Host and client address; the signed headers do not", async () => {
    const f = await fixture();
    const key = await deriveEdgeKey(TOKEN);
    const signed = await signForward(key, fields({ method: "POST", target: "/hello?x=1" }), new Date());
    const r = await send(f.url, "POST", "/hello?x=1", { ...signed, "content-type": "text/plain", "x-forwarded-for": "6.6.6.6" }, "body!");
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.text) as SeenRequest;
    expect(seen).toMatchObject({
      method: "POST",
      url: "/hello?x=1",
      host: "shop.apps.test",
      forwardedFor: "203.0.113.7",
      forwardedProto: "https",
      body: "body!",
    });
    expect(seen.wspHeaders).toEqual([]);
  });

  it("unsigned, tampered Host, wrong key and expired: 403 before the app", async () => {
    const f = await fixture();
    const key = await deriveEdgeKey(TOKEN);
    const unsigned = await send(f.url, "GET", "/hello?x=1", { host: "shop.apps.test" });
    expect(unsigned.status).toBe(403);
    expect(unsigned.headers["x-workspace-edge"]).toBe("not_forwarded");
    const signed = await signForward(key, fields(), new Date());
    const tampered = await send(f.url, "GET", "/hello?x=1", { ...signed, [FORWARD_HEADERS.host]: "admin.apps.test" });
    expect(tampered.status).toBe(403);
    const otherPath = await send(f.url, "GET", "/admin", signed);
    expect(otherPath.status).toBe(403);
    const wrongKey = await send(f.url, "GET", "/hello?x=1", await signForward(await deriveEdgeKey("wsr_other"), fields(), new Date()));
    expect(wrongKey.status).toBe(403);
    const expired = await send(f.url, "GET", "/hello?x=1", await signForward(key, fields(), new Date(Date.now() - 120_000)));
    expect(expired.status).toBe(403);
    expect((await send(f.url, "GET", "/hello?x=1", signed)).status).toBe(200);
  });

  it("a deployment not on this server: 404; one starting is held until it listens, else 503", async () => {
    const f = await fixture(300);
    const key = await deriveEdgeKey(TOKEN);
    const unknown = await send(f.url, "GET", "/", await signForward(key, fields({ target: "/", deploymentId: "dep_gone" }), new Date()));
    expect(unknown.status).toBe(404);
    f.ports.set("dep_a", null);
    const waking = await send(f.url, "GET", "/", await signForward(key, fields({ target: "/" }), new Date()));
    expect(waking.status).toBe(503);
    expect(waking.headers["retry-after"]).toBe("5");
    setTimeout(() => f.ports.set("dep_a", f.appPort), 100);
    const held = await send(f.url, "GET", "/", await signForward(key, fields({ target: "/" }), new Date()));
    expect(held.status).toBe(200);
  });

  it("a signed WebSocket passes both ways; an unsigned one is refused", async () => {
    const f = await fixture();
    const key = await deriveEdgeKey(TOKEN);
    const signed = await signForward(key, fields({ target: "/ws" }), new Date());
    const ws = new WebSocket(`${f.url.replace("http", "ws")}/ws`, { headers: signed });
    cleanups.push(() => ws.terminate());
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    ws.send("ping");
    const answer = await new Promise<string>((r) => ws.once("message", (d) => r(d.toString())));
    expect(answer).toBe("echo:ping");
    const refused = new WebSocket(`${f.url.replace("http", "ws")}/ws`);
    const status = await new Promise<number>((r) => refused.once("unexpected-response", (_req, res) => r(res.statusCode!)));
    expect(status).toBe(403);
  });
});
