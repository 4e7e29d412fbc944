/**
 * Delivery of notifications to every channel kind, on each runtime's real
 * delivery path, to receivers that check each provider's payload format and
 * verify webhook signatures: the outbox, retries with backoff, Retry-After,
 * permanent failures, redirects, timeouts, the test send, and the secret canary.
 */
import { describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { emitNotificationEvent } from "../../../functions/notifications";
import { TEST_SEND_LIMITS, testSendTakes } from "../../../functions/notifications/limits";
import { pruneRateLimits, returnRateLimits, takeRateLimits } from "../../../functions/notifications/rate-limit";
import { storedIn, expectProblem, expectStatus, seedMember, seedTenant, type Member } from "../../support/harness";
import { pendingSends, type NotificationsEnv } from "../../support/notifications-env";
import { verifyStandardWebhook } from "../../support/receiver-core";
import { useNotificationsEnv } from "../../support/notifications-env";

type Json = Record<string, any>;

const SECRET = `whsec_${btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => 200 - i)))}`;

const { h, env } = useNotificationsEnv();
const N = "/api/notifications";
const send = (method: string, token: string, path: string, json?: unknown) => h.request(`${N}${path}`, { method, token, json });

/** A verified channel of `kind`, subscribed to `category`. */
async function channel(t: Member, kind: string, config: Json, category = "deploy.failed"): Promise<Json> {
  const c = await expectStatus(await send("POST", t.token, "/channels", { kind, label: `${kind} channel`, config }), 201);
  await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200);
  await expectStatus(await send("PUT", t.token, "/subscriptions", { category, channelId: c.id, enabled: true }), 200);
  return c;
}

async function emit(t: Member, body: Json = {}): Promise<Json> {
  return expectStatus(
    await send("POST", t.token, "/events", {
      category: "deploy.failed",
      title: "Deploy of web failed",
      message: "Build step exited with code 1",
      projectId: "prj_web",
      ...body,
    }),
    202,
  );
}

async function feed(t: Member): Promise<Json[]> {
  return (await expectStatus(await send("GET", t.token, "/deliveries"), 200)).items;
}

async function detail(t: Member, id: string): Promise<Json> {
  return expectStatus(await send("GET", t.token, `/deliveries/${id}`), 200);
}

async function webhookSetup(script?: Parameters<NotificationsEnv["receiver"]>[0], fallback?: Parameters<NotificationsEnv["receiver"]>[1]) {
  const t = await seedTenant(h);
  const receiver = await env.receiver(script, fallback);
  const c = await channel(t, "webhook", { url: receiver.webhookUrl, signingSecret: SECRET });
  return { t, receiver, c };
}

describe("notification delivery", () => {
  it("delivers a webhook signed per Standard Webhooks, once, and records the attempt", async () => {
    const { t, receiver, c } = await webhookSetup();
    const result = await emit(t, { data: { commit: "abc123" } });
    expect(result).toMatchObject({ recipients: 1, sends: 1 });
    await env.settle(t.orgId);

    expect(receiver.recorder.hits).toHaveLength(1);
    const hit = receiver.recorder.hits[0]!;
    expect(hit.method).toBe("POST");
    expect(hit.headers["content-type"]).toBe("application/json");
    expect(hit.headers["webhook-id"]).toMatch(/^msg_/);
    expect(Math.abs(Number(hit.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(60);
    expect(hit.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(await verifyStandardWebhook(SECRET, hit.headers, hit.body)).toBe(true);
    expect(await verifyStandardWebhook(SECRET, hit.headers, hit.body.replace("web", "wob"))).toBe(false);

    const body = JSON.parse(hit.body);
    expect(body).toEqual({
      type: "deploy.failed",
      timestamp: expect.any(String),
      data: {
        eventId: result.eventId,
        organizationId: t.orgId,
        category: "deploy.failed",
        title: "Deploy of web failed",
        message: "Build step exited with code 1",
        projectId: "prj_web",
        data: { commit: "abc123" },
        createdAt: body.timestamp,
      },
    });

    const [entry] = await feed(t);
    expect(entry!.eventId).toBe(result.eventId);
    expect(entry!.sends).toEqual([
      expect.objectContaining({
        id: hit.headers["webhook-id"],
        channelId: c.id,
        kind: "webhook",
        status: "delivered",
        attempts: 1,
        lastError: null,
        lastStatusCode: 200,
      }),
    ]);
    const d = await detail(t, entry!.id);
    expect(d.sends[0].attemptLog).toEqual([expect.objectContaining({ attempt: 1, outcome: "delivered", statusCode: 200, error: null, nextAttemptAt: null })]);

    // Delivering again sends nothing more.
    await env.deliver();
    expect(receiver.recorder.hits).toHaveLength(1);
  });

  it("sends a build.failed once to a channel subscribed to it and to deploy.failed, without terminal escapes", async () => {
    const { t, receiver, c } = await webhookSetup();
    await expectStatus(await send("PUT", t.token, "/subscriptions", { category: "build.failed", channelId: c.id, enabled: true }), 200);
    const esc = "\u001b";
    const result = await emit(t, {
      category: "build.failed",
      title: "Build failed",
      message: `web: build failed (exit code 1): npm run build; first error lines:\n${esc}[31m[PARSE_ERROR] Unexpected token${esc}[39m`,
      data: { stage: `${esc}[1mbuild${esc}[22m` },
    });
    expect(result).toMatchObject({ recipients: 1, sends: 1 });
    await env.settle(t.orgId);
    expect(receiver.recorder.hits).toHaveLength(1);
    const hit = receiver.recorder.hits[0]!;
    expect(hit.body).not.toContain(esc);
    expect(hit.body).not.toMatch(/\\u001b/i);
    expect(JSON.parse(hit.body).data).toMatchObject({
      category: "build.failed",
      message: "web: build failed (exit code 1): npm run build; first error lines:\n[PARSE_ERROR] Unexpected token",
      data: { stage: "build" },
    });
  });

  it("verifies with the generated secret shown once on create", async () => {
    const t = await seedTenant(h);
    const receiver = await env.receiver();
    const created = await expectStatus(await send("POST", t.token, "/channels", { kind: "webhook", label: "hook", config: { url: receiver.webhookUrl } }), 201);
    await expectStatus(await send("PATCH", t.token, `/channels/${created.id}`, { verified: true }), 200);
    await expectStatus(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: created.id, enabled: true }), 200);
    await emit(t);
    await env.settle(t.orgId);
    const hit = receiver.recorder.hits[0]!;
    expect(await verifyStandardWebhook(created.signingSecret, hit.headers, hit.body)).toBe(true);
  });

  it("posts Slack's incoming-webhook format", async () => {
    const t = await seedTenant(h);
    const r = await env.receiver();
    await channel(t, "slack", { webhookUrl: r.slackUrl });
    await emit(t, { title: "Deploy <web> & api failed", message: "see <logs> & retry" });
    await env.settle(t.orgId);
    expect(r.recorder.hits).toHaveLength(1);
    expect(r.recorder.hits[0]!.url).toBe(new URL(r.slackUrl).toString());
    expect(r.recorder.hits[0]!.headers["content-type"]).toBe("application/json");
    const body = r.recorder.json();
    expect(body.text).toBe("Deploy &lt;web&gt; &amp; api failed");
    expect(body.blocks[0]).toEqual({ type: "header", text: { type: "plain_text", text: "Deploy <web> & api failed", emoji: false } });
    expect(body.blocks[1]).toEqual({ type: "section", text: { type: "mrkdwn", text: "see &lt;logs&gt; &amp; retry" } });
    expect(body.blocks[2].type).toBe("context");
    expect(body.blocks[2].elements.map((e: Json) => e.text)).toEqual(["*Category:* Deploy failed", "*Project:* prj_web"]);
    expect(r.recorder.hits[0]!.headers["webhook-signature"]).toBeUndefined();
  });

  it("posts Discord's execute-webhook format with mentions disabled", async () => {
    const t = await seedTenant(h);
    const r = await env.receiver([], { status: 204 });
    await channel(t, "discord", { webhookUrl: r.discordUrl });
    await emit(t, { message: "@everyone the deploy failed" });
    await env.settle(t.orgId);
    const body = r.recorder.json();
    expect(body.allowed_mentions).toEqual({ parse: [] });
    expect(body.embeds).toHaveLength(1);
    expect(body.embeds[0]).toMatchObject({
      title: "Deploy of web failed",
      description: "@everyone the deploy failed",
      color: 0xd13438,
      fields: [
        { name: "Category", value: "Deploy failed", inline: true },
        { name: "Project", value: "prj_web", inline: true },
      ],
    });
    expect(Number.isNaN(Date.parse(body.embeds[0].timestamp))).toBe(false);
    expect((await feed(t))[0]!.sends[0]).toMatchObject({ status: "delivered", lastStatusCode: 204 });
  });

  it("posts an Adaptive Card to a Teams workflow URL and a MessageCard to a connector URL", async () => {
    const t = await seedTenant(h);
    const workflow = await env.receiver([], { status: 202 });
    const connector = await env.receiver();
    await channel(t, "msteams", { webhookUrl: workflow.teamsWorkflowUrl });
    await channel(t, "msteams", { webhookUrl: connector.teamsConnectorUrl });
    expect(await emit(t)).toMatchObject({ recipients: 1, sends: 2 });
    await env.settle(t.orgId);

    const card = workflow.recorder.json();
    expect(card.type).toBe("message");
    expect(card.attachments).toHaveLength(1);
    expect(card.attachments[0].contentType).toBe("application/vnd.microsoft.card.adaptive");
    const content = card.attachments[0].content;
    expect(content).toMatchObject({ $schema: "http://adaptivecards.io/schemas/adaptive-card.json", type: "AdaptiveCard", version: "1.4" });
    expect(content.body[0]).toMatchObject({ type: "TextBlock", text: "Deploy of web failed", weight: "Bolder", wrap: true });
    expect(content.body[1]).toMatchObject({ type: "TextBlock", text: "Build step exited with code 1" });
    expect(content.body[2]).toEqual({
      type: "FactSet",
      facts: [
        { title: "Category", value: "Deploy failed" },
        { title: "Project", value: "prj_web" },
      ],
    });

    const legacy = connector.recorder.json();
    expect(legacy).toMatchObject({
      "@type": "MessageCard",
      "@context": "https://schema.org/extensions",
      summary: "Deploy of web failed",
      title: "Deploy of web failed",
      text: "Build step exited with code 1",
      themeColor: "D13438",
    });
    expect(legacy.sections[0].facts).toEqual([
      { name: "Category", value: "Deploy failed" },
      { name: "Project", value: "prj_web" },
    ]);
  });

  it(`sends e-mail through the runtime's mail transport`, async () => {
    const t = await seedTenant(h);
    const address = `ops-${t.userId.slice(-8)}@example.test`;
    await channel(t, "email", { address });
    await emit(t, { title: "Backup of db failed", message: "Disk full on the backup volume" });
    await env.settle(t.orgId);
    const mail = env.emails().filter((m) => m.to.includes(address));
    expect(mail).toHaveLength(1);
    expect(mail[0]!.subject).toBe("Backup of db failed");
    expect(mail[0]!.text).toContain("Disk full on the backup volume");
    expect(mail[0]!.text).toContain("Category: Deploy failed");
    expect((await feed(t))[0]!.sends[0]).toMatchObject({ kind: "email", status: "delivered", attempts: 1 });
  });

  it("retries a receiver that fails twice, then succeeds, with the same webhook-id", async () => {
    const { t, receiver } = await webhookSetup([{ status: 500, body: "boom" }, { status: 503 }]);
    await emit(t);
    await env.settle(t.orgId);
    const hits = receiver.recorder.hits;
    expect(hits).toHaveLength(3);
    expect(new Set(hits.map((x) => x.headers["webhook-id"])).size).toBe(1);
    for (const hit of hits) expect(await verifyStandardWebhook(SECRET, hit.headers, hit.body)).toBe(true);
    expect(hits[1]!.at - hits[0]!.at).toBeGreaterThanOrEqual(35); // 50 ms ±20 %

    const [entry] = await feed(t);
    expect(entry!.sends[0]).toMatchObject({ status: "delivered", attempts: 3, lastStatusCode: 200, lastError: null });
    const log = (await detail(t, entry!.id)).sends[0].attemptLog;
    expect(log.map((a: Json) => [a.attempt, a.outcome, a.statusCode])).toEqual([
      [1, "retry", 500],
      [2, "retry", 503],
      [3, "delivered", 200],
    ]);
    expect(log[0].error).toBe("The destination answered HTTP 500");
    expect(log[0].nextAttemptAt).toEqual(expect.any(String));
    expect(JSON.stringify(log)).not.toContain("boom");
  });

  it("honours Retry-After on 429", async () => {
    const { t, receiver } = await webhookSetup([{ status: 429, headers: { "retry-after": "1" } }]);
    await emit(t);
    await env.settle(t.orgId);
    const hits = receiver.recorder.hits;
    expect(hits).toHaveLength(2);
    const log = (await detail(t, (await feed(t))[0]!.id)).sends[0].attemptLog;
    expect(log[0]).toMatchObject({ outcome: "retry", statusCode: 429 });
    expect(Date.parse(log[0].nextAttemptAt) - Date.parse(log[0].startedAt)).toBeGreaterThanOrEqual(1000);
    // Measured from the attempt's start, not from its arrival (a cold first send may take a while to arrive).
    expect(hits[1]!.at).toBeGreaterThanOrEqual(Date.parse(log[0].nextAttemptAt));
  });

  it("gives up after the bounded number of attempts", async () => {
    const { t, receiver } = await webhookSetup([], { status: 502 });
    await emit(t);
    await env.settle(t.orgId);
    expect(receiver.recorder.hits).toHaveLength(4);
    const [entry] = await feed(t);
    expect(entry!.sends[0]).toMatchObject({ status: "failed", attempts: 4, lastStatusCode: 502 });
    expect(entry!.sends[0].lastError).toContain("gave up after 4 attempts");
    const log = (await detail(t, entry!.id)).sends[0].attemptLog;
    expect(log.map((a: Json) => a.outcome)).toEqual(["retry", "retry", "retry", "failed"]);
  });

  it("fails at once on a 4xx other than 408 and 429", async () => {
    const { t, receiver } = await webhookSetup([{ status: 410, body: "gone for good" }]);
    await emit(t);
    await env.settle(t.orgId);
    expect(receiver.recorder.hits).toHaveLength(1);
    expect((await feed(t))[0]!.sends[0]).toMatchObject({ status: "failed", attempts: 1, lastStatusCode: 410, lastError: "The destination answered HTTP 410" });
  });

  it("never follows a redirect", async () => {
    const target = await env.receiver();
    const { t, receiver } = await webhookSetup([{ status: 302, headers: { location: target.webhookUrl } }]);
    await emit(t);
    await env.settle(t.orgId);
    expect(receiver.recorder.hits).toHaveLength(1);
    expect(target.recorder.hits).toHaveLength(0);
    const s = (await feed(t))[0]!.sends[0];
    expect(s).toMatchObject({ status: "failed", lastStatusCode: 302 });
    expect(s.lastError).toContain("redirects are not followed");
  });

  it("times out a destination that does not answer, then retries", async () => {
    const { t, receiver } = await webhookSetup([{ status: 200, delayMs: 3_500 }]);
    await emit(t);
    await env.settle(t.orgId, 20_000);
    expect(receiver.recorder.hits).toHaveLength(2);
    const log = (await detail(t, (await feed(t))[0]!.id)).sends[0].attemptLog;
    expect(log[0]).toMatchObject({ outcome: "retry", statusCode: null, error: "The destination did not answer within 2 s" });
    expect(log[1]).toMatchObject({ outcome: "delivered" });
  });

  it("delivers an event reported in-process through the runtime's background path (engine / cron)", async () => {
    const { t, receiver } = await webhookSetup();
    const result = await emitNotificationEvent(h.db, { orgId: t.orgId, category: "deploy.failed", title: "reported in-process" });
    expect(result).toMatchObject({ recipients: 1, sends: 1 });
    expect(await pendingSends(h.db, t.orgId)).toBe(1);
    expect(receiver.recorder.hits).toHaveLength(0);
    await env.deliver();
    expect(await pendingSends(h.db, t.orgId)).toBe(0);
    expect(receiver.recorder.hits).toHaveLength(1);
    expect(receiver.recorder.json().data.title).toBe("reported in-process");
  });

  it("cancels a queued send whose channel was disabled, unverified or deleted meanwhile", async () => {
    const t = await seedTenant(h);
    const r = await env.receiver();
    const [disabled, unverified, deleted] = [
      await channel(t, "webhook", { url: r.webhookUrl }),
      await channel(t, "slack", { webhookUrl: r.slackUrl }),
      await channel(t, "discord", { webhookUrl: r.discordUrl }),
    ];
    expect(await emitNotificationEvent(h.db, { orgId: t.orgId, category: "deploy.failed", title: "queued" })).toMatchObject({ sends: 3 });
    await expectStatus(await send("PATCH", t.token, `/channels/${disabled.id}`, { enabled: false }), 200);
    await expectStatus(await send("PATCH", t.token, `/channels/${unverified.id}`, { verified: false }), 200);
    expect((await send("DELETE", t.token, `/channels/${deleted.id}`)).status).toBe(204);
    await env.settle(t.orgId);
    expect(r.recorder.hits).toHaveLength(0);
    const sends = (await feed(t))[0]!.sends as Json[];
    const byKind = Object.fromEntries(sends.map((s) => [s.kind, [s.channelId, s.status, s.attempts, s.lastError]]));
    expect(byKind).toEqual({
      webhook: [disabled.id, "cancelled", 0, "The channel is disabled"],
      slack: [unverified.id, "cancelled", 0, "The channel is not verified"],
      discord: [null, "cancelled", 0, "The channel was deleted"],
    });
  });

  it("queues nothing for unverified or disabled channels", async () => {
    const t = await seedTenant(h);
    const r = await env.receiver();
    const unverified = await expectStatus(await send("POST", t.token, "/channels", { kind: "webhook", label: "u", config: { url: r.webhookUrl } }), 201);
    await expectStatus(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: unverified.id, enabled: true }), 200);
    const disabled = await channel(t, "webhook", { url: r.webhookUrl });
    await expectStatus(await send("PATCH", t.token, `/channels/${disabled.id}`, { enabled: false }), 200);
    const unsubscribed = await channel(t, "webhook", { url: r.webhookUrl });
    await expectStatus(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: unsubscribed.id, enabled: false }), 200);
    expect(await emit(t)).toMatchObject({ recipients: 1, sends: 0 });
    await env.settle(t.orgId);
    expect(r.recorder.hits).toHaveLength(0);
  });

  it("fans out to every member's channels in one event", async () => {
    const t = await seedTenant(h);
    const r = await env.receiver();
    const members = [t, await seedMember(h, t.orgId, "member"), await seedMember(h, t.orgId, "viewer")];
    for (const m of members) {
      await channel(m, "webhook", { url: r.webhookUrl, signingSecret: SECRET });
      await channel(m, "slack", { webhookUrl: r.slackUrl });
    }
    const quiet = await seedMember(h, t.orgId, "member");
    const quietSub = (await expectStatus(await send("GET", quiet.token, "/subscriptions?limit=100"), 200)).items.find(
      (s: Json) => s.category === "deploy.failed",
    );
    await expectStatus(await send("PUT", quiet.token, "/subscriptions", { category: "deploy.failed", channelId: quietSub.channelId, enabled: false }), 200);

    expect(await emit(t)).toMatchObject({ recipients: 3, sends: 6 });
    await env.settle(t.orgId);
    expect(r.recorder.hits).toHaveLength(6);
    const webhookHits = r.recorder.hits.filter((x) => x.headers["webhook-id"]);
    expect(webhookHits).toHaveLength(3);
    expect(new Set(webhookHits.map((x) => x.headers["webhook-id"])).size).toBe(3);
    expect(r.recorder.hits.filter((x) => x.url.startsWith("https://hooks.slack.com/"))).toHaveLength(3);
    for (const m of members) expect((await feed(m))[0]!.sends.map((s: Json) => s.status)).toEqual(["delivered", "delivered"]);
    expect(await feed(quiet)).toEqual([]);
  });

  describe("test send", () => {
    it("delivers now, reports success and verifies the channel", async () => {
      const t = await seedTenant(h);
      const r = await env.receiver();
      const c = await expectStatus(
        await send("POST", t.token, "/channels", { kind: "webhook", label: "hook", config: { url: r.webhookUrl, signingSecret: SECRET } }),
        201,
      );
      const res = await expectStatus(await send("POST", t.token, `/channels/${c.id}/test`), 200);
      expect(res).toMatchObject({ delivered: true, statusCode: 200, reason: null, channel: { id: c.id, verified: true } });
      expect(r.recorder.hits).toHaveLength(1);
      const hit = r.recorder.hits[0]!;
      expect(await verifyStandardWebhook(SECRET, hit.headers, hit.body)).toBe(true);
      expect(JSON.parse(hit.body)).toMatchObject({ type: "test", data: { title: "Test notification" } });
    });

    it("reports the failure without echoing the remote body, leaving the channel unverified", async () => {
      const t = await seedTenant(h);
      const r = await env.receiver([{ status: 500, body: "REMOTE-BODY-stack-trace-with-secrets" }]);
      const c = await expectStatus(await send("POST", t.token, "/channels", { kind: "slack", label: "s", config: { webhookUrl: r.slackUrl } }), 201);
      const res = await send("POST", t.token, `/channels/${c.id}/test`);
      const text = await res.clone().text();
      const body = await expectStatus(res, 200);
      expect(body).toMatchObject({ delivered: false, statusCode: 500, reason: "The destination answered HTTP 500", channel: { verified: false } });
      expect(text).not.toContain("REMOTE-BODY");
      expect(h.logs.join("\n")).not.toContain("REMOTE-BODY");
      expect(JSON.parse(r.recorder.hits[0]!.body).blocks[0].text.text).toBe("Test notification");
    });

    it("reports an unreachable destination", async () => {
      const t = await seedTenant(h);
      const c = await expectStatus(
        await send("POST", t.token, "/channels", { kind: "discord", label: "d", config: { webhookUrl: "https://discord.com/api/webhooks/999/unrouted" } }),
        201,
      );
      const body = await expectStatus(await send("POST", t.token, `/channels/${c.id}/test`), 200);
      expect(body).toMatchObject({ delivered: false, statusCode: null, channel: { verified: false } });
      expect(body.reason).toMatch(/^Could not connect to the destination/);
    });

    it("e-mails a test message, and adds one to the feed for in_app", async () => {
      const t = await seedTenant(h);
      const address = `test-${t.userId.slice(-8)}@example.test`;
      const mail = await expectStatus(await send("POST", t.token, "/channels", { kind: "email", label: "m", config: { address } }), 201);
      expect(await expectStatus(await send("POST", t.token, `/channels/${mail.id}/test`), 200)).toMatchObject({ delivered: true, channel: { verified: true } });
      expect(
        env
          .emails()
          .filter((m) => m.to.includes(address))
          .map((m) => m.subject),
      ).toEqual(["Test notification"]);

      const bell = (await expectStatus(await send("GET", t.token, "/channels"), 200)).items.find((c: Json) => c.kind === "in_app");
      expect(await expectStatus(await send("POST", t.token, `/channels/${bell.id}/test`), 200)).toMatchObject({ delivered: true, statusCode: null });
      expect((await feed(t)).map((d) => [d.category, d.title])).toEqual([["test", "Test notification"]]);
    });
  });

  describe("test send rate limit", () => {
    const test = (t: Member, id: string) => send("POST", t.token, `/channels/${id}/test`);
    const webhook = async (t: Member, url: string) =>
      expectStatus(await send("POST", t.token, "/channels", { kind: "webhook", label: "hook", config: { url, signingSecret: SECRET } }), 201);
    const rows = async (where: ReturnType<typeof sql>) => {
      const res = await h.db.execute(sql`select key, count from rate_limits where ${where}`);
      return ((res as unknown as { rows?: Json[] }).rows ?? (res as unknown as Json[])) as Array<{ key: string; count: number }>;
    };

    it("answers 429 with Retry-After past the channel's limit; other channels and organizations are unaffected; the next window allows again", async () => {
      const t = await seedTenant(h);
      const r = await env.receiver();
      const c = await webhook(t, r.webhookUrl);
      const max = TEST_SEND_LIMITS.perChannel.max;
      for (let i = 0; i < max; i++) expect(await expectStatus(await test(t, c.id), 200)).toMatchObject({ delivered: true });
      const res = await test(t, c.id);
      const retryAfter = Number(res.headers.get("retry-after"));
      const problem = await expectProblem(res, 429);
      expect(problem).toMatchObject({ type: "urn:workspace:problem:too-many-requests", title: "Too Many Requests" });
      expect(problem.detail).toContain("5 per 10 minutes per channel");
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThan(500);
      expect(retryAfter).toBeLessThanOrEqual(600);
      expect(r.recorder.hits).toHaveLength(max); // nothing sent past the limit

      // Another channel of the same organization, and another organization, still send.
      const other = await webhook(t, r.webhookUrl);
      await expectStatus(await test(t, other.id), 200);
      const t2 = await seedTenant(h);
      await expectStatus(await test(t2, (await webhook(t2, r.webhookUrl)).id), 200);
      // The spec's manual verification is untouched.
      expect(await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200)).toMatchObject({ verified: true });

      // The clock moves past the window (its end moved into the past): allowed again.
      await h.db.execute(sql`update rate_limits set window_end = now() - interval '1 second' where key = ${`test:channel:${c.id}`}`);
      await expectStatus(await test(t, c.id), 200);
      expect(r.recorder.hits).toHaveLength(max + 3);
    });

    it("caps an organization's test sends across its channels, giving the channel's unit back", async () => {
      const t = await seedTenant(h);
      const r = await env.receiver();
      const c = await webhook(t, r.webhookUrl);
      // The organization spent its hour's budget (the same keys the route takes).
      const orgTake = testSendTakes(t.orgId, c.id)[1]!;
      expect((await takeRateLimits(h.db, [{ ...orgTake, n: TEST_SEND_LIMITS.perOrg.max }], new Date())).get(orgTake.key)!.granted).toBe(
        TEST_SEND_LIMITS.perOrg.max,
      );
      const res = await test(t, c.id);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(3500);
      expect((await expectProblem(res, 429)).detail).toContain("organization");
      expect(r.recorder.hits).toHaveLength(0);
      expect(await rows(sql`key = ${`test:channel:${c.id}`}`)).toEqual([{ key: `test:channel:${c.id}`, count: 0 }]);
      // Another member's organization is not this one.
      const t2 = await seedTenant(h);
      await expectStatus(await test(t2, (await webhook(t2, r.webhookUrl)).id), 200);
    });

    it("documents the limit and the 429 with Retry-After in the OpenAPI document", async () => {
      const doc = await expectStatus(await h.request("/api/openapi.json"), 200);
      const op = doc.paths["/api/notifications/channels/{id}/test"].post;
      expect(op.description).toContain("5 per 10 minutes per channel and 30 per hour per organization");
      expect(op.responses["429"].content["application/problem+json"]).toBeDefined();
      expect(op.responses["429"].headers["Retry-After"].schema).toEqual({ type: "integer", minimum: 1 });
    });

    it("does not limit in_app test sends (they reach only the caller's feed)", async () => {
      const t = await seedTenant(h);
      const bell = (await expectStatus(await send("GET", t.token, "/channels"), 200)).items.find((c: Json) => c.kind === "in_app");
      for (let i = 0; i < TEST_SEND_LIMITS.perChannel.max + 2; i++) await expectStatus(await test(t, bell.id), 200);
    });

    it.runIf(h.realConcurrency)("lets exactly the limit through when 20 test sends race (real Postgres)", async () => {
      const t = await seedTenant(h);
      const r = await env.receiver();
      const c = await webhook(t, r.webhookUrl);
      const statuses = await Promise.all(Array.from({ length: 20 }, async () => (await test(t, c.id)).status));
      expect(statuses.filter((s) => s === 200)).toHaveLength(TEST_SEND_LIMITS.perChannel.max);
      expect(statuses.filter((s) => s === 429)).toHaveLength(20 - TEST_SEND_LIMITS.perChannel.max);
      expect(r.recorder.hits).toHaveLength(TEST_SEND_LIMITS.perChannel.max);
      expect(await rows(sql`key = ${`test:org:${t.orgId}`}`)).toEqual([{ key: `test:org:${t.orgId}`, count: TEST_SEND_LIMITS.perChannel.max }]);
    });

    it("counts fixed windows in the database: grants, exhaustion, the next window, give-back and pruning", async () => {
      const key = `spec:${crypto.randomUUID()}`;
      const limit = { key, max: 3, windowMs: 1_000 };
      // A day ahead: the windows must not have ended by the real clock, which the other suites' pruning (sharing this
      // database) deletes by; a window of 2001 could be pruned between two steps and start anew.
      const t0 = new Date(Math.floor(Date.now() / 1000) * 1000 + 86_400_000);
      const at = (ms: number) => new Date(t0.getTime() + ms);
      const take = async (ms: number, n = 1) => (await takeRateLimits(h.db, [{ ...limit, n }], at(ms))).get(key)!;
      expect(await take(0, 2)).toEqual({ granted: 2, windowEnd: at(1_000), count: 2 });
      expect(await take(100, 5)).toEqual({ granted: 1, windowEnd: at(1_000), count: 3 });
      expect(await take(999)).toEqual({ granted: 0, windowEnd: at(1_000), count: 3 });
      await returnRateLimits(h.db, [{ key, n: 1, windowEnd: at(1_000) }]);
      expect(await take(999)).toEqual({ granted: 1, windowEnd: at(1_000), count: 3 });
      // Past the window's end a new window starts at the first use.
      expect(await take(1_000)).toEqual({ granted: 1, windowEnd: at(2_000), count: 1 });
      // A give-back for a window that has ended changes nothing.
      await returnRateLimits(h.db, [{ key, n: 1, windowEnd: at(1_000) }]);
      expect(await take(1_500, 9)).toEqual({ granted: 2, windowEnd: at(2_000), count: 3 });
      // Windows that ended are pruned; a current one is kept (with room for every window the other suites left).
      const ended = `spec:${crypto.randomUUID()}`;
      const current = `spec:${crypto.randomUUID()}`;
      await takeRateLimits(h.db, [{ key: ended, max: 1, windowMs: 1_000 }], new Date(Date.now() - 60_000));
      await takeRateLimits(h.db, [{ key: current, max: 1, windowMs: 3_600_000 }], new Date());
      await pruneRateLimits(h.db, new Date(), 1_000_000);
      expect((await rows(sql`key in (${ended}, ${current})`)).map((x) => x.key)).toEqual([current]);
    });
  });

  it("never returns, logs or stores channel secrets in the clear (canary)", async () => {
    const t = await seedTenant(h);
    const r = await env.receiver([{ status: 500 }]);
    const canarySecret = `whsec_${btoa(`canary-${crypto.randomUUID()}`.slice(0, 30))}`;
    const canaries = [
      canarySecret.slice(6),
      new URL(r.slackUrl).pathname.split("/").pop()!,
      new URL(r.discordUrl).pathname.split("/").pop()!,
      "teamssig",
      new URL(r.teamsConnectorUrl).pathname.split("/").slice(-2).join("/"),
    ];
    const responses: string[] = [];
    const call = async (method: string, path: string, json?: unknown) => {
      const res = await send(method, t.token, path, json);
      responses.push(await res.clone().text());
      return res;
    };
    const ids: string[] = [];
    for (const [kind, config] of [
      ["webhook", { url: r.webhookUrl, signingSecret: canarySecret }],
      ["slack", { webhookUrl: r.slackUrl }],
      ["discord", { webhookUrl: r.discordUrl }],
      ["msteams", { webhookUrl: r.teamsWorkflowUrl }],
      ["msteams", { webhookUrl: r.teamsConnectorUrl }],
    ] as const) {
      const c = await expectStatus(await call("POST", "/channels", { kind, label: kind, config }), 201);
      ids.push(c.id);
      await call("PATCH", `/channels/${c.id}`, { verified: true, label: `${kind}!` });
      await call("PUT", "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true });
      await call("POST", `/channels/${c.id}/test`);
    }
    // A bad config echoes nothing back either.
    await call("POST", "/channels", { kind: "slack", label: "bad", config: { webhookUrl: r.slackUrl.replace("https:", "http:") } });
    await call("PATCH", `/channels/${ids[1]}`, { config: { webhookUrl: r.slackUrl } });
    await call("GET", "/channels?limit=100");
    await expectStatus(await call("POST", "/events", { category: "deploy.failed", title: "canary event" }), 202);
    await env.settle(t.orgId);
    const [entry] = await feed(t);
    await call("GET", `/deliveries/${entry!.id}`);
    await call("GET", "/deliveries");

    const logs = h.logs.join("\n");
    for (const canary of canaries) {
      for (const body of responses) expect(body).not.toContain(canary);
      expect(logs).not.toContain(canary);
      expect(await storedIn(h, canary)).toEqual([]);
    }
    // The receiver did get the real secrets' effects: signed requests to the real URLs.
    expect(r.recorder.hits.length).toBeGreaterThanOrEqual(10);
  });
});
