/**
 * The listener's connection limits, on real sockets: the per-client-address cap
 * (MAX_CONNECTIONS_PER_CLIENT; TRUSTED_PROXIES not capped), the request-head
 * timeout, the keep-alive idle timeout and the stalled-body timeout. Two
 * loopback addresses (127.0.0.2 and 127.0.0.3: Linux routes all of 127/8 to
 * lo) hold many half-open connections (a request head never finished) while a
 * third address (127.0.0.1) is still answered. First on the bare server layer
 * with short timeouts, then through `npm start`'s server (startSelfHosted).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { peerKey } from "../../functions/self-hosted/connection-guard";
import { RAISED_HARD_LIMIT, raiseFdLimit, readFdLimits } from "../../functions/self-hosted/fd-limit";
import { type BoundServer, bindHttpServer, type Timeouts } from "../../functions/self-hosted/http-server";
import { parseCidr } from "../../shared/net/cidr";
import { useCleanups } from "../support/cleanups";
import { useSelfHostedServer } from "../support/self-hosted-server";

const { cleanups } = useCleanups("ws-conn-");

const PARTIAL_HEAD = "GET / HTTP/1.1\r\nHost: x\r\n";

async function smallServer(opts: { max?: number; trusted?: string[]; timeouts?: Partial<Timeouts> } = {}): Promise<BoundServer> {
  const app = new Hono();
  app.get("/ok", (c) => c.json({ ok: true }));
  // A stalled body is cut: its read fails (aborted), answered by nobody.
  app.post("/echo", async (c) => c.json({ length: (await c.req.text().catch(() => "")).length }));
  const bound = await bindHttpServer({
    port: 0,
    host: "127.0.0.1",
    maxConnectionsPerClient: opts.max,
    trustedProxies: (opts.trusted ?? []).map((t) => parseCidr(t)!),
    timeouts: opts.timeouts,
    closeGraceMs: 100,
  });
  bound.serve(app.fetch);
  cleanups.push(() => bound.close());
  return bound;
}

interface Held {
  sockets: Socket[];
  open(): number;
  close(): void;
}

/** `n` connections from `localAddress`, each sending `head` and nothing more; resolves once every one connected or closed. */
async function hold(port: number, localAddress: string, n: number, head = PARTIAL_HEAD): Promise<Held> {
  const sockets: Socket[] = [];
  let closed = 0;
  const BATCH = 100;
  for (let i = 0; i < n; i += BATCH) {
    await Promise.all(
      Array.from(
        { length: Math.min(BATCH, n - i) },
        () =>
          new Promise<void>((resolve) => {
            const socket = connect({ port, host: "127.0.0.1", localAddress }, () => {
              if (head) socket.write(head);
              resolve();
            });
            socket.on("error", () => {});
            socket.once("close", () => {
              closed++;
              resolve();
            });
            sockets.push(socket);
          }),
      ),
    );
  }
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
  });
  return {
    sockets,
    open: () => sockets.length - closed,
    close: () => {
      for (const s of sockets) s.destroy();
    },
  };
}

async function until(check: () => boolean, ms: number, what: string) {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A GET from 127.0.0.1 over a fresh connection; its status and how long it took. */
async function timedGet(url: string, init?: RequestInit): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const res = await fetch(url, { ...init, headers: { ...init?.headers, connection: "close" }, signal: AbortSignal.timeout(5_000) });
  await res.text();
  return { status: res.status, ms: performance.now() - started };
}

/** Resolves with the ms from now until the socket closes (or rejects after `ms`). */
function closedWithin(socket: Socket, ms: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return resolve(0);
    const timer = setTimeout(() => reject(new Error(`socket still open after ${ms} ms`)), ms);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(performance.now() - started);
    });
  });
}

function connected(port: number, localAddress = "127.0.0.1"): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: "127.0.0.1", localAddress }, () => resolve(socket));
    socket.once("error", reject);
    cleanups.push(() => void socket.destroy());
  });
}

describe("per-client-address cap", () => {
  it("two addresses holding 2 × 1000 half-open connections keep 64 each; a third address is answered at once", async () => {
    const bound = await smallServer({ max: 64 });
    const [a, b] = await Promise.all([hold(bound.port, "127.0.0.2", 1000), hold(bound.port, "127.0.0.3", 1000)]);
    // Over the cap, the server closes at once: what stays open is the cap.
    await until(() => a.open() === 64 && b.open() === 64, 10_000, `64 open each (now ${a.open()}, ${b.open()})`);
    expect(bound.connections.open.get("127.0.0.2")).toBe(64);
    expect(bound.connections.open.get("127.0.0.3")).toBe(64);
    expect(bound.connections.refused).toBeGreaterThanOrEqual(2 * 936);
    for (let i = 0; i < 5; i++) {
      const answer = await timedGet(`http://127.0.0.1:${bound.port}/ok`);
      expect(answer.status).toBe(200);
      expect(answer.ms).toBeLessThan(1_000);
    }
    // Still held: the third address did not make room by closing theirs.
    expect(a.open()).toBe(64);
    // The count map keeps only addresses with open connections.
    a.close();
    b.close();
    await until(() => bound.connections.open.size === 0, 5_000, "count map emptied");
    const again = await hold(bound.port, "127.0.0.2", 10);
    await new Promise((r) => setTimeout(r, 100));
    expect(again.open()).toBe(10);
  });

  it("counts an upgraded connection (a WebSocket through the edge) until it closes; the head timeout no longer applies to it", async () => {
    const bound = await bindHttpServer({
      port: 0,
      host: "127.0.0.1",
      maxConnectionsPerClient: 3,
      timeouts: { headersMs: 500, checkIntervalMs: 100 },
      closeGraceMs: 100,
    });
    cleanups.push(() => bound.close());
    // An edge that takes every upgrade and keeps the tunnel open (reading it, as the edge's tunnel does).
    bound.serve(() => new Response("api"), {
      handle: () => false,
      upgrade: (_req, socket) => {
        socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
        socket.resume();
        socket.on("end", () => socket.end());
        return true;
      },
    });
    const upgrade = "GET /ws HTTP/1.1\r\nHost: app.apps.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    const tunnels = await hold(bound.port, "127.0.0.2", 3, upgrade);
    await new Promise((r) => setTimeout(r, 1_500));
    // Three times the head timeout later the tunnels are still open, and still count.
    expect(tunnels.open()).toBe(3);
    expect(bound.connections.open.get("127.0.0.2")).toBe(3);
    const fourth = await hold(bound.port, "127.0.0.2", 1, upgrade);
    await until(() => fourth.open() === 0, 2_000, "the fourth connection closed");
    tunnels.sockets[0]!.destroy();
    await until(() => bound.connections.open.get("127.0.0.2") === 2, 2_000, "a tunnel closed");
    const fifth = await hold(bound.port, "127.0.0.2", 1, upgrade);
    await new Promise((r) => setTimeout(r, 200));
    expect(fifth.open()).toBe(1);
  });

  it("does not cap a peer in TRUSTED_PROXIES", async () => {
    const bound = await smallServer({ max: 16, trusted: ["127.0.0.4/32"] });
    const proxy = await hold(bound.port, "127.0.0.4", 200);
    const other = await hold(bound.port, "127.0.0.5", 200);
    await until(() => other.open() === 16, 5_000, `16 open from 127.0.0.5 (now ${other.open()})`);
    await new Promise((r) => setTimeout(r, 200));
    expect(proxy.open()).toBe(200);
    expect(bound.connections.open.has("127.0.0.4")).toBe(false);
  });

  it("counts IPv4-mapped IPv6 peers as their IPv4 address", () => {
    expect(peerKey("::ffff:127.0.0.2")).toBe("127.0.0.2");
    expect(peerKey("::FFFF:10.1.2.3")).toBe("10.1.2.3");
    expect(peerKey("127.0.0.2")).toBe("127.0.0.2");
    expect(peerKey("2001:db8::1")).toBe("2001:db8::1");
    expect(peerKey("::ffff:abcd")).toBe("::ffff:abcd");
  });
});

describe("timeouts", () => {
  it("closes a request head not finished within the header timeout, and a connection that sends nothing", async () => {
    const bound = await smallServer({ timeouts: { headersMs: 1_000, checkIntervalMs: 100 } });
    const partial = await connected(bound.port);
    partial.on("error", () => {});
    partial.write(PARTIAL_HEAD);
    const silent = await connected(bound.port);
    silent.on("error", () => {});
    const [a, b] = await Promise.all([closedWithin(partial, 3_000), closedWithin(silent, 3_000)]);
    expect(a).toBeGreaterThan(800);
    expect(b).toBeGreaterThan(800);
    // A head that comes in time is answered.
    expect((await timedGet(`http://127.0.0.1:${bound.port}/ok`)).status).toBe(200);
  });

  it("closes an idle keep-alive connection after the keep-alive timeout", async () => {
    const bound = await smallServer({ timeouts: { keepAliveMs: 500 } });
    const socket = await connected(bound.port);
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => {
      answer += d;
    });
    socket.write("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
    await until(() => answer.includes('{"ok":true}'), 2_000, "the answer");
    expect(answer).toMatch(/keep-alive/i);
    const ms = await closedWithin(socket, 3_000);
    expect(ms).toBeGreaterThan(300);
  });

  it("closes a request whose body stalls; one that keeps trickling passes", async () => {
    const bound = await smallServer({ timeouts: { bodyIdleMs: 800 } });
    const stalled = await connected(bound.port);
    stalled.on("error", () => {});
    stalled.write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789");
    const ms = await closedWithin(stalled, 3_000);
    expect(ms).toBeGreaterThan(700);

    const trickle = await connected(bound.port);
    let answer = "";
    trickle.setEncoding("utf8");
    trickle.on("data", (d) => {
      answer += d;
    });
    const body = "x".repeat(10);
    trickle.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n`);
    // One byte every 300 ms: 3 s in all, well past the 800 ms idle timeout.
    for (const ch of body) {
      await new Promise((r) => setTimeout(r, 300));
      expect(trickle.destroyed).toBe(false);
      trickle.write(ch);
    }
    await until(() => answer.includes('{"length":10}'), 2_000, `the answer (got ${JSON.stringify(answer)})`);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
  });

  it("does not time out a body the server itself holds back (its reader is slow)", async () => {
    const app = new Hono();
    app.post("/slow", async (c) => {
      // Reads nothing for 2 s (the body fills the buffers and the socket is paused), then all of it.
      await new Promise((r) => setTimeout(r, 2_000));
      const heldBack = !(c.env as { incoming: IncomingMessage }).incoming.complete;
      return c.json({ heldBack, length: (await c.req.arrayBuffer()).byteLength });
    });
    const bound = await bindHttpServer({ port: 0, host: "127.0.0.1", timeouts: { bodyIdleMs: 500 }, closeGraceMs: 100 });
    bound.serve(app.fetch);
    cleanups.push(() => bound.close());
    const res = await fetch(`http://127.0.0.1:${bound.port}/slow`, { method: "POST", body: new Uint8Array(32 * 1024 * 1024) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ heldBack: true, length: 32 * 1024 * 1024 });
  });
});

describe("open-file limit", () => {
  it.runIf(process.platform === "linux")("raises a soft limit under the hard one to the hard one (prlimit)", async () => {
    const before = readFdLimits();
    if (!before || before.hard <= 1024) return;
    // A process started with a low soft limit stands in for the server (the call takes a pid).
    const child = spawn("prlimit", [`--nofile=1024:${before.hard}`, "sleep", "30"], { stdio: "ignore" });
    cleanups.push(() => void child.kill());
    await until(() => readFdLimits(child.pid!)?.soft === 1024 && readFileSync(`/proc/${child.pid}/comm`, "utf8").trim() === "sleep", 5_000, "sleep started");
    const line = raiseFdLimit(child.pid!);
    const after = readFdLimits(child.pid!)!;
    expect(after.soft).toBeGreaterThanOrEqual(before.hard);
    expect(after.soft).toBe(after.hard);
    expect(line).toBe(`Open-file limit raised from 1024 to ${after.soft} (hard ${after.hard}).`);
    // Already at the most allowed: nothing to say.
    if (after.hard >= RAISED_HARD_LIMIT || process.getuid?.() !== 0) expect(raiseFdLimit(child.pid!)).toBeNull();
  });
});

describe("through npm start's server", () => {
  const s = useSelfHostedServer("conn_limits", { RUNNER: "off", MAX_CONNECTIONS_PER_CLIENT: "64", TRUSTED_PROXIES: "127.0.0.4/32" });

  it("answers GET /api/me from a third address while two addresses hold 2 × 1000 half-open connections", async () => {
    const port = s.port();
    const [a, b] = await Promise.all([hold(port, "127.0.0.2", 1000), hold(port, "127.0.0.3", 1000)]);
    await until(() => a.open() === 64 && b.open() === 64, 10_000, `64 open each (now ${a.open()}, ${b.open()})`);
    const proxy = await hold(port, "127.0.0.4", 100);
    const timings: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      await s.api("GET", "/api/me");
      timings.push(performance.now() - started);
    }
    console.log(`GET /api/me during a 2 × 1000 hold (cap 64): ${timings.map((t) => t.toFixed(0)).join(", ")} ms`);
    expect(Math.max(...timings)).toBeLessThan(2_000);
    expect(a.open() + b.open()).toBe(128);
    expect(proxy.open()).toBe(100);
  });

  it("raised the open-file limit to its hard limit at start (Linux)", () => {
    const limits = readFdLimits();
    if (limits) expect(limits.soft).toBe(limits.hard);
  });
});
