/**
 * Notifications on the self-hosted adapter as an operator runs it: the
 * in-process delivery engine (woken by events, stopped on close), SMTP_URL,
 * OUTBOUND_ALLOW_PRIVATE, and a restart while a retry is pending.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";
import { startHttpReceiver, startSmtpReceiver } from "../support/receivers";
import { useCleanups } from "../support/cleanups";

const { cleanups, tempDir } = useCleanups("ws-notify-");

async function start(env: Record<string, string>): Promise<RunningServer> {
  const server = await startSelfHosted(loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", ...env }), () => {});
  cleanups.push(() => server.close());
  return server;
}

function client(server: RunningServer, token: string) {
  return async (method: string, path: string, json?: unknown) => {
    const res = await fetch(`${server.url}/api/notifications${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(json ? { "content-type": "application/json" } : {}) },
      body: json ? JSON.stringify(json) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("notifications on the self-hosted adapter", () => {
  it("delivers webhooks and e-mail in the background after an event", async () => {
    const dir = tempDir();
    const hooks = await startHttpReceiver();
    cleanups.push(() => hooks.close());
    const smtp = await startSmtpReceiver();
    cleanups.push(() => smtp.close());
    const server = await start({ DATA_DIR: dir, SMTP_URL: smtp.url, OUTBOUND_ALLOW_PRIVATE: "true", EMAIL_FROM: "Ops <ops@workspace.test>" });
    const api = client(server, readFileSync(join(dir, "owner-token"), "utf8").trim());

    for (const [kind, config] of [
      ["webhook", { url: `${hooks.origin}/in` }],
      ["email", { address: "owner@example.test" }],
    ] as const) {
      const c = await api("POST", "/channels", { kind, label: kind, config });
      expect(c.status).toBe(201);
      expect((await api("PATCH", `/channels/${c.body.id}`, { verified: true })).status).toBe(200);
      expect((await api("PUT", "/subscriptions", { category: "backup.failed", channelId: c.body.id, enabled: true })).status).toBe(200);
    }
    const event = await api("POST", "/events", { category: "backup.failed", title: "Nightly backup failed" });
    expect(event).toMatchObject({ status: 202, body: { recipients: 1, sends: 2 } });

    // Woken by the event: well before the 1 s poll would have come round.
    await until(() => hooks.recorder.hits.length === 1 && smtp.messages.length === 1, 5_000);
    expect(JSON.parse(hooks.recorder.hits[0]!.body).data.title).toBe("Nightly backup failed");
    expect(smtp.messages[0]).toMatchObject({ from: "ops@workspace.test", to: ["owner@example.test"], subject: "Nightly backup failed" });
    await until(async () => (await api("GET", "/deliveries")).body.items[0].sends.every((s: { status: string }) => s.status === "delivered"));
  }, 60_000);

  it("refuses loopback destinations unless OUTBOUND_ALLOW_PRIVATE is set", async () => {
    const dir = tempDir();
    const hooks = await startHttpReceiver();
    cleanups.push(() => hooks.close());
    const server = await start({ DATA_DIR: dir });
    const api = client(server, readFileSync(join(dir, "owner-token"), "utf8").trim());
    for (const url of [`${hooks.origin}/in`, `http://localhost:${new URL(hooks.origin).port}/in`]) {
      const c = await api("POST", "/channels", { kind: "webhook", label: "local", config: { url } });
      const test = await api("POST", `/channels/${c.body.id}/test`);
      expect(test.status).toBe(200);
      expect(test.body).toMatchObject({ delivered: false, statusCode: null, channel: { verified: false } });
      expect(test.body.reason).toBe("The destination is a loopback address; sends to private networks are refused unless OUTBOUND_ALLOW_PRIVATE=true");
    }
    expect(hooks.recorder.hits).toHaveLength(0);
  }, 60_000);

  it("a restart while a retry is pending delivers exactly once", async () => {
    const dir = tempDir();
    // The first attempt is refused with Retry-After: the send is pending when the server stops.
    const hooks = await startHttpReceiver([{ status: 503, headers: { "retry-after": "1" } }]);
    cleanups.push(() => hooks.close());
    const first = await start({ DATA_DIR: dir, OUTBOUND_ALLOW_PRIVATE: "true" });
    const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
    let api = client(first, token);
    const c = await api("POST", "/channels", { kind: "webhook", label: "hook", config: { url: `${hooks.origin}/in` } });
    await api("PATCH", `/channels/${c.body.id}`, { verified: true });
    await api("PUT", "/subscriptions", { category: "deploy.failed", channelId: c.body.id, enabled: true });
    expect((await api("POST", "/events", { category: "deploy.failed", title: "pending across a restart" })).status).toBe(202);
    await until(() => hooks.recorder.hits.length === 1);
    await first.close();

    const second = await start({ DATA_DIR: dir, OUTBOUND_ALLOW_PRIVATE: "true" });
    api = client(second, token);
    await until(async () => (await api("GET", "/deliveries")).body.items[0].sends[0].status === "delivered");
    await new Promise((r) => setTimeout(r, 1_200)); // a poll or two later: nothing more arrives
    const hits = hooks.recorder.hits;
    expect(hits).toHaveLength(2);
    expect(hits[0]!.headers["webhook-id"]).toBe(hits[1]!.headers["webhook-id"]);
    expect(hits[1]!.at - hits[0]!.at).toBeGreaterThanOrEqual(950);
    const entry = (await api("GET", "/deliveries")).body.items[0];
    const detail = (await api("GET", `/deliveries/${entry.id}`)).body;
    expect(detail.sends[0].attemptLog.map((a: { outcome: string; statusCode: number }) => [a.outcome, a.statusCode])).toEqual([
      ["retry", 503],
      ["delivered", 200],
    ]);
  }, 60_000);
});
