/**
 * Log streams over real HTTP on the Node adapter's server (@hono/node-server):
 * a line written through the batching writer wakes the stream through the log feed
 * at once (well under the poll interval), and a client that disconnects ends the
 * stream on the server (it stops waiting and reading).
 */
import { serve, type ServerType } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../functions/app";
import { createLogWriter } from "../../functions/logs/writer";
import { silentLogger } from "../../shared/http/logger";
import { sseSettings } from "../../shared/http/sse";
import { createLogFeed, type LogFeed } from "../../shared/logs/feed";
import { eventually, seedTenant, useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectHelpers } from "../support/projects";

const h = useHarness(pgliteHarness);
const { create } = projectHelpers(h);
let server: ServerType | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

describe("log streams over HTTP", () => {
  it("wake on the writer's notify and end on the server when the client disconnects", async () => {
    const inner = createLogFeed();
    let waits = 0;
    let lastSignal: AbortSignal | undefined;
    const feed: LogFeed = {
      notify: (ids) => inner.notify(ids),
      wait: (id, ms, signal) => {
        waits++;
        lastSignal = signal;
        return inner.wait(id, ms, signal);
      },
    };
    const writer = createLogWriter({ db: h.db, logger: silentLogger, onAppended: (ids) => feed.notify(ids) });
    const app = createApp({
      services: () => ({ db: h.db, keyring: h.keyring, config: { mode: "self-hosted", sharedDomain: "localhost" }, logFeed: feed }),
      logger: silentLogger,
    });
    server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((resolve) => server!.once("listening", () => resolve()));
    const t = await seedTenant(h);
    const p = await create(t);
    // A poll interval far longer than the test: only the feed can deliver the line in time.
    const saved = sseSettings.pollMs;
    sseSettings.pollMs = 60_000;
    try {
      const abort = new AbortController();
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/projects/${p.id}/logs/stream`, {
        headers: { authorization: `Bearer ${t.token}`, "x-organization-id": t.orgId },
        signal: abort.signal,
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await eventually(async () => expect(waits).toBeGreaterThan(0));
      const sent = Date.now();
      writer.write({ orgId: t.orgId, projectId: p.id, deploymentId: null, kind: "runtime", stream: "stdout", at: new Date(), message: "hello" });
      let text = "";
      while (!text.includes("hello")) text += new TextDecoder().decode((await reader.read()).value);
      expect(Date.now() - sent).toBeLessThan(2_000);
      expect(text).toMatch(/^id: \d+\nevent: log\ndata: \{.*"message":"hello"\}\n\n$/);
      expect(lastSignal!.aborted).toBe(false);
      abort.abort();
      // The server's stream stops: its wait is aborted, and no more waits follow, whatever is written.
      await eventually(async () => expect(lastSignal!.aborted).toBe(true));
      const settled = waits;
      for (let i = 0; i < 3; i++) {
        writer.write({ orgId: t.orgId, projectId: p.id, deploymentId: null, kind: "runtime", stream: "stdout", at: new Date(), message: "later" });
        await writer.flush();
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(waits).toBe(settled);
    } finally {
      sseSettings.pollMs = saved;
    }
  });
});
