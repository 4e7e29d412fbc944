/**
 * The local Neon WebSocket proxy (`npm run dev:proxy`, the Worker tests): a web page
 * in the developer's browser must not reach it, and it forwards to the configured
 * database only, never to another loopback port.
 */
import { createRequire } from "node:module";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startWsProxy, type WsProxy } from "../../shared/db/ws-proxy";

// Node's build of `ws` (the bare import may resolve the browser one under vitest).
const { WebSocket } = createRequire(import.meta.url)("ws") as typeof import("ws");

const PG = { host: "127.0.0.1", port: 5432 };

let proxy: WsProxy;
let other: net.Server;
let otherPort: number;
let otherConnections = 0;

beforeAll(async () => {
  proxy = await startWsProxy({ target: PG });
  other = net.createServer((socket) => {
    otherConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  otherPort = (other.address() as AddressInfo).port;
});

afterAll(async () => {
  await proxy.close();
  await new Promise<void>((resolve) => other.close(() => resolve()));
});

type Outcome = { status: number; socket?: import("ws").WebSocket };

/** Opens `?address=…` with the given headers: 101 and the open socket, or the refusal's status. */
function connect(address: string, headers: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${proxy.url}?address=${address}`, { headers });
    socket.on("open", () => resolve({ status: 101, socket }));
    socket.on("unexpected-response", (_req, res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    socket.on("error", reject);
  });
}

/** A Postgres StartupMessage (protocol 3.0) for user postgres, database test. */
function startupMessage(): Buffer {
  const params = Buffer.from("user\0postgres\0database\0test\0\0");
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + params.length, 0);
  head.writeInt32BE(196608, 4);
  return Buffer.concat([head, params]);
}

/** Sends a startup message through the socket and returns the first byte of the server's answer. */
function firstReplyByte(socket: import("ws").WebSocket): Promise<string> {
  return new Promise((resolve, reject) => {
    socket.once("message", (data: Buffer) => resolve(String.fromCharCode(data[0]!)));
    socket.once("close", () => reject(new Error("closed before any reply")));
    socket.send(startupMessage());
  });
}

const pg = `${PG.host}:${PG.port}`;

describe("dev WebSocket proxy", () => {
  it("refuses a page from another origin at the upgrade (403)", async () => {
    for (const origin of ["https://evil.example", "http://127.0.0.1.evil.example", "http://localhost@evil.example", "null", "file://"]) {
      expect((await connect(pg, { Origin: origin })).status, origin).toBe(403);
    }
  });

  it("accepts a client without Origin (the Neon driver) and forwards to the configured database", async () => {
    const { status, socket } = await connect(pg);
    expect(status).toBe(101);
    // 'R': the server's authentication answer, so the bytes really reached Postgres.
    if (inject("pgKind") === "postgres") expect(await firstReplyByte(socket!)).toBe("R");
    socket!.close();
  });

  it("accepts pages served from loopback, any port", async () => {
    for (const origin of ["http://127.0.0.1:5173", "http://localhost:8788", "https://localhost", "http://[::1]:3000"]) {
      const { status, socket } = await connect(pg, { Origin: origin });
      expect(status, origin).toBe(101);
      socket!.close();
    }
  });

  it("refuses any other target, and never connects to it", async () => {
    for (const address of [`127.0.0.1:${otherPort}`, `localhost:${otherPort}`, `[::1]:${otherPort}`, "127.0.0.2:5432", "", "127.0.0.1"]) {
      expect((await connect(address)).status, address).toBe(403);
    }
    // The configured target still works after the refusals.
    const { status, socket } = await connect(pg);
    expect(status).toBe(101);
    socket!.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(otherConnections).toBe(0);
  });
});
