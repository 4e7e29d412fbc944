/**
 * Notifications (functions/notifications/channels.ts): channels, per-kind validation, verification
 * transitions and secrets. These suites queue no external sends (only in_app recipients), so they
 * never compete with the delivery suite for the outbox of a shared database.
 */
import { describe, expect, it } from "vitest";
import { ChannelSchema, SubscriptionSchema } from "../../../functions/notifications/schema";
import { expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { DISCORD, type Json, notificationsHelpers, SECRET, SLACK, TEAMS_CONNECTOR, TEAMS_WORKFLOW } from "../../support/notifications";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { get, send, createChannel, channels, subscriptions, inApp } = notificationsHelpers(h);

describe("notifications: channels", () => {
  it("creates an in_app channel verified and enabled", async () => {
    const t = await seedTenant(h);
    const c = await createChannel(t, { kind: "in_app", label: "Bell" });
    expect(c).toMatchObject({ kind: "in_app", label: "Bell", config: {}, enabled: true, verified: true });
    expect(c.id).toMatch(/^nch_/);
    const again = await createChannel(t, { kind: "in_app", label: "Bell 2", config: {} });
    expect(again.verified).toBe(true);
  });

  it("creates every other kind unverified and enabled", async () => {
    const t = await seedTenant(h);
    const configs: Array<[string, Json]> = [
      ["email", { address: "ops@example.com" }],
      ["webhook", { url: "https://example.com/hook" }],
      ["slack", { webhookUrl: SLACK }],
      ["discord", { webhookUrl: DISCORD }],
      ["msteams", { webhookUrl: TEAMS_WORKFLOW }],
    ];
    for (const [kind, config] of configs) {
      const c = await createChannel(t, { kind, label: kind, config });
      expect(c, kind).toMatchObject({ kind, enabled: true, verified: false });
    }
  });

  it("generates a whsec_ signing secret for a webhook, shows it once, and stores it encrypted", async () => {
    const t = await seedTenant(h);
    const c = await createChannel(t, { kind: "webhook", label: "hook", config: { url: "https://example.com/hook" } });
    expect(c.signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(c.config).toEqual({ url: "https://example.com/hook", signingSecretConfigured: true });
    const listed = (await channels(t)).find((x) => x.id === c.id)!;
    expect(listed.signingSecret).toBeUndefined();
    expect(JSON.stringify(listed)).not.toContain(c.signingSecret.slice(6));

    // A given secret is kept and not echoed back.
    const given = await createChannel(t, { kind: "webhook", label: "given", config: { url: "https://example.com/h2", signingSecret: SECRET } });
    expect(given.signingSecret).toBeUndefined();
    const res = await h.db.execute(`select secret_ciphertext as s, config::text as c from notification_channels where id = '${given.id}'` as never);
    const row = (res as unknown as { rows: { s: string; c: string }[] }).rows[0]!;
    expect(row.s).toMatch(/^v1\./);
    expect(row.c).not.toContain("whsec_");
    const ctx = { orgId: t.orgId, table: "notification_channels", column: "secret", rowId: given.id };
    expect(JSON.parse(await h.keyring.decrypt(row.s, ctx))).toEqual({ signingSecret: SECRET });
    await expect(h.keyring.decrypt(row.s, { ...ctx, rowId: c.id })).rejects.toThrow();
  });

  it("never returns chat webhook URLs: hints for slack and discord, webhookUrlConfigured for msteams", async () => {
    const t = await seedTenant(h);
    const slack = await createChannel(t, { kind: "slack", label: "s", config: { webhookUrl: SLACK } });
    expect(slack.config).toEqual({ webhookUrlConfigured: true, webhookUrlHint: "https://hooks.slack.com/services/T0AAAA111/B0BBBB222/…" });
    const discord = await createChannel(t, { kind: "discord", label: "d", config: { url: DISCORD } });
    expect(discord.config).toEqual({ webhookUrlConfigured: true, webhookUrlHint: "https://discord.com/api/webhooks/123456789012345678/…" });
    const workflow = await createChannel(t, { kind: "msteams", label: "t", config: { webhookUrl: TEAMS_WORKFLOW } });
    expect(workflow.config).toEqual({ webhookUrlConfigured: true, format: "workflow" });
    const connector = await createChannel(t, { kind: "msteams", label: "t2", config: { webhookUrl: TEAMS_CONNECTOR } });
    expect(connector.config).toEqual({ webhookUrlConfigured: true, format: "connector" });
    const all = JSON.stringify(await channels(t));
    for (const secret of ["abcdefSECRET123", "discordTOKENsecret", "teamsSIG", "IncomingWebhook/dddd"]) expect(all).not.toContain(secret);
  });

  describe("per-kind validation matrix", () => {
    const valid: Array<[string, Json | undefined]> = [
      ["email", { address: "ops@example.com" }],
      ["email", { address: "first.last+alerts@sub.example.co.uk" }],
      ["webhook", { url: "https://example.com/hook" }],
      ["webhook", { url: "http://hooks.internal.example:8080/path?x=1" }],
      ["webhook", { url: "https://example.com/h", signingSecret: SECRET }],
      ["slack", { webhookUrl: SLACK }],
      ["slack", { url: SLACK }],
      ["discord", { webhookUrl: DISCORD }],
      ["discord", { webhookUrl: "https://discordapp.com/api/webhooks/1/tok" }],
      ["discord", { webhookUrl: "https://discord.com/api/v10/webhooks/1/tok" }],
      ["discord", { webhookUrl: "https://canary.discord.com/api/webhooks/1/tok" }],
      ["msteams", { webhookUrl: TEAMS_WORKFLOW }],
      ["msteams", { webhookUrl: TEAMS_CONNECTOR }],
      [
        "msteams",
        {
          webhookUrl:
            "https://default0123.45.environment.api.powerplatform.com:443/powerautomate/automations/direct/workflows/abc/triggers/manual/paths/invoke?api-version=1&sig=x",
        },
      ],
      ["msteams", { webhookUrl: "https://outlook.office.com/webhook/abc@def/IncomingWebhook/ghi/jkl" }],
      ["in_app", {}],
      ["in_app", undefined],
    ];
    const invalid: Array<[string, Json | undefined, string]> = [
      ["email", { address: "not-an-email" }, "config.address"],
      ["email", { address: "a@" }, "config.address"],
      ["email", { address: "@example.com" }, "config.address"],
      ["email", { address: "a b@example.com" }, "config.address"],
      ["email", { address: "" }, "config.address"],
      ["email", { address: 42 }, "config.address"],
      ["email", {}, "config.address"],
      ["email", undefined, "config"],
      ["email", { address: "ops@example.com", cc: "x@example.com" }, "config.cc"],
      ["webhook", { url: "ftp://example.com/hook" }, "config.url"],
      ["webhook", { url: "example.com/hook" }, "config.url"],
      ["webhook", { url: "javascript:alert(1)" }, "config.url"],
      ["webhook", { url: "https://user:pass@example.com/hook" }, "config.url"],
      ["webhook", { url: "" }, "config.url"],
      ["webhook", {}, "config.url"],
      ["webhook", { url: "https://example.com/h", signingSecret: "whsec_c2hvcnQ=" }, "config.signingSecret"],
      ["webhook", { url: "https://example.com/h", signingSecret: "not-a-secret" }, "config.signingSecret"],
      ["slack", { webhookUrl: "http://hooks.slack.com/services/T0/B0/x" }, "config.webhookUrl"],
      ["slack", { webhookUrl: "https://hooks.slack.com.evil.example/services/T0/B0/x" }, "config.webhookUrl"],
      ["slack", { webhookUrl: "https://example.com/services/T0/B0/x" }, "config.webhookUrl"],
      ["slack", { webhookUrl: "https://hooks.slack.com/workflows/T0/B0/x" }, "config.webhookUrl"],
      ["slack", { webhookUrl: "https://hooks.slack.com/services/T0/B0" }, "config.webhookUrl"],
      ["slack", { webhookUrl: "https://hooks.slack.com:8443/services/T0/B0/x" }, "config.webhookUrl"],
      ["slack", { url: "not a url" }, "config.url"],
      ["slack", {}, "config.webhookUrl"],
      ["slack", { webhookUrl: SLACK, url: SLACK }, "config.url"],
      ["discord", { webhookUrl: "http://discord.com/api/webhooks/1/tok" }, "config.webhookUrl"],
      ["discord", { webhookUrl: "https://discord.com/api/channels/1/messages" }, "config.webhookUrl"],
      ["discord", { webhookUrl: "https://discord.com.evil.example/api/webhooks/1/tok" }, "config.webhookUrl"],
      ["discord", { webhookUrl: "https://evil.example/api/webhooks/1/tok" }, "config.webhookUrl"],
      ["discord", { webhookUrl: "https://discord.com/api/webhooks/abc/tok" }, "config.webhookUrl"],
      ["discord", { webhookUrl: "https://discord.com/api/webhooks/1" }, "config.webhookUrl"],
      ["msteams", { webhookUrl: "http://contoso.webhook.office.com/webhookb2/a/IncomingWebhook/b/c" }, "config.webhookUrl"],
      ["msteams", { webhookUrl: "https://example.com/workflows/abc" }, "config.webhookUrl"],
      ["msteams", { webhookUrl: "https://contoso.webhook.office.com/other/a" }, "config.webhookUrl"],
      ["msteams", { webhookUrl: "https://logic.azure.com.evil.example/workflows/abc" }, "config.webhookUrl"],
      ["msteams", { webhookUrl: "https://prod-1.westus.logic.azure.com/other/abc" }, "config.webhookUrl"],
      ["msteams", { webhookUrl: SLACK }, "config.webhookUrl"],
      ["in_app", { url: "https://example.com" }, "config.url"],
    ];

    it("accepts every valid config", async () => {
      const t = await seedTenant(h);
      for (const [kind, config] of valid) {
        const res = await send("POST", t.token, "/channels", { kind, label: `${kind} ok`, ...(config === undefined ? {} : { config }) });
        const text = await res.clone().text();
        expect(res.status, `${kind} ${JSON.stringify(config)}: ${text}`).toBe(201);
      }
    });

    it("rejects every invalid config with 400 naming the field, storing nothing", async () => {
      const t = await seedTenant(h);
      const before = (await channels(t)).length;
      const failures: string[] = [];
      for (const [kind, config, field] of invalid) {
        const res = await send("POST", t.token, "/channels", { kind, label: "bad", ...(config === undefined ? {} : { config }) });
        const body = await res.json();
        if (res.status !== 400 || body.field !== field) failures.push(`${kind} ${JSON.stringify(config)}: ${res.status} ${body.field} (${body.detail})`);
      }
      expect(failures).toEqual([]);
      expect((await channels(t)).length).toBe(before);
    });

    it("rejects an unknown kind naming the allowed kinds, and a missing or empty label", async () => {
      const t = await seedTenant(h);
      const p = await expectProblem(await send("POST", t.token, "/channels", { kind: "pager", label: "x", config: {} }), 400, "kind");
      expect(p.allowed).toEqual(["email", "webhook", "in_app", "slack", "discord", "msteams"]);
      await expectProblem(await send("POST", t.token, "/channels", { label: "x" }), 400, "kind");
      await expectProblem(await send("POST", t.token, "/channels", { kind: "email", config: { address: "a@example.com" } }), 400, "label");
      await expectProblem(await send("POST", t.token, "/channels", { kind: "email", label: "  ", config: { address: "a@example.com" } }), 400, "label");
      await expectProblem(
        await send("POST", t.token, "/channels", { kind: "email", label: "x", config: { address: "a@example.com" }, enabled: false }),
        400,
        "enabled",
      );
      await expectProblem(await send("POST", t.token, "/channels", { kind: "email", label: "x", config: "a@example.com" }), 400, "config");
    });
  });

  describe("verification transitions", () => {
    it("PATCH verified true verifies; a config change resets it; label, enabled and an unchanged config do not", async () => {
      const t = await seedTenant(h);
      const c = await createChannel(t, { kind: "slack", label: "alerts", config: { webhookUrl: SLACK } });
      expect(c.verified).toBe(false);
      const verified = await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200, ChannelSchema);
      expect(verified.verified).toBe(true);

      const renamed = await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { label: "renamed", enabled: false }), 200, ChannelSchema);
      expect(renamed).toMatchObject({ label: "renamed", enabled: false, verified: true });
      const same = await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { config: { webhookUrl: SLACK } }), 200, ChannelSchema);
      expect(same.verified).toBe(true);

      const moved = await expectStatus(
        await send("PATCH", t.token, `/channels/${c.id}`, { config: { webhookUrl: "https://hooks.slack.com/services/T0AAAA111/B0CCCC333/other" } }),
        200,
      );
      expect(moved.verified).toBe(false);
      expect(moved.config.webhookUrlHint).toBe("https://hooks.slack.com/services/T0AAAA111/B0CCCC333/…");
      const again = await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200, ChannelSchema);
      expect(again.verified).toBe(true);
    });

    it("a webhook URL change resets verified and keeps the signing secret", async () => {
      const t = await seedTenant(h);
      const c = await createChannel(t, { kind: "webhook", label: "hook", config: { url: "https://example.com/a", signingSecret: SECRET } });
      await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200, ChannelSchema);
      const moved = await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { config: { url: "https://example.com/b" } }), 200, ChannelSchema);
      expect(moved).toMatchObject({ verified: false, config: { url: "https://example.com/b", signingSecretConfigured: true } });
      const res = await h.db.execute(`select secret_ciphertext as s from notification_channels where id = '${c.id}'` as never);
      const s = (res as unknown as { rows: { s: string }[] }).rows[0]!.s;
      const ctx = { orgId: t.orgId, table: "notification_channels", column: "secret", rowId: c.id };
      expect(JSON.parse(await h.keyring.decrypt(s, ctx)).signingSecret).toBe(SECRET);
    });

    it("an in_app channel stays verified", async () => {
      const t = await seedTenant(h);
      const c = await inApp(t);
      expect(c.verified).toBe(true);
      expect((await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { config: {} }), 200, ChannelSchema)).verified).toBe(true);
      await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { verified: false }), 400, "verified");
      await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { config: { url: "https://example.com" } }), 400, "config.url");
    });

    it("an invalid PATCH changes nothing", async () => {
      const t = await seedTenant(h);
      const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
      await expectBody(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200, ChannelSchema);
      await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { label: "x", config: { address: "nope" } }), 400, "config.address");
      await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { kind: "webhook" }), 400, "kind");
      await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { enabled: "no" }), 400, "enabled");
      const now = (await channels(t)).find((x) => x.id === c.id)!;
      expect(now).toMatchObject({ label: "mail", verified: true, enabled: true, config: { address: "a@example.com" } });
    });
  });

  it("deleting a channel removes it and its subscriptions", async () => {
    const t = await seedTenant(h);
    const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
    const sub = await expectBody(
      await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true }),
      200,
      SubscriptionSchema,
    );
    const res = await send("DELETE", t.token, `/channels/${c.id}`);
    expect(res.status).toBe(204);
    expect((await channels(t)).some((x) => x.id === c.id)).toBe(false);
    expect((await subscriptions(t)).some((s) => s.id === sub.id)).toBe(false);
    await expectProblem(await send("DELETE", t.token, `/channels/${c.id}`), 404);
  });

  it("pages the channel list in creation order", async () => {
    const t = await seedTenant(h);
    for (let i = 0; i < 3; i++) await createChannel(t, { kind: "email", label: `m${i}`, config: { address: `m${i}@example.com` } });
    const first = await expectStatus(await get(t.token, "/channels?limit=2"), 200);
    expect(first.items).toHaveLength(2);
    const second = await expectStatus(await get(t.token, `/channels?limit=2&cursor=${first.nextCursor}`), 200);
    expect(second.items).toHaveLength(2);
    expect(second.nextCursor).toBeNull();
    const ids = [...first.items, ...second.items].map((c: Json) => c.id);
    expect([...ids].sort()).toEqual(ids);
    await expectProblem(await get(t.token, "/channels?limit=0"), 400, "limit");
  });
});
