/**
 * The spec's Notifications section: categories, channels (per-kind validation,
 * verification transitions, secrets), subscriptions, org defaults and member
 * seeding, the in-app feed, and ownership / organization isolation.
 *
 * This suite queues no external sends (only in_app recipients), so it never
 * competes with the delivery suite for the outbox of a shared database.
 */
import { describe, expect, it } from "vitest";
import { newId } from "../../../shared/ids";
import { expectProblem, expectStatus, seedMember, seedTenant, type Member } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const SLACK = "https://hooks.slack.com/services/T0AAAA111/B0BBBB222/abcdefSECRET123";
const DISCORD = "https://discord.com/api/webhooks/123456789012345678/discordTOKENsecret";
const TEAMS_WORKFLOW =
  "https://prod-12.westus.logic.azure.com:443/workflows/0123abcd/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=teamsSIG";
const TEAMS_CONNECTOR = "https://contoso.webhook.office.com/webhookb2/aaaa-bbbb@cccc/IncomingWebhook/dddd/eeee";

/** A `whsec_` secret of 32 bytes. */
const SECRET = `whsec_${btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => i + 1)))}`;

type Json = Record<string, any>;

const h = useRuntimeHarness();
const N = "/api/notifications";
const get = (token: string, path: string, org?: string) => h.request(`${N}${path}`, { token, org });
const send = (method: string, token: string, path: string, json?: unknown, org?: string) => h.request(`${N}${path}`, { method, token, json, org });
const createChannel = async (t: Member, body: Json, org?: string): Promise<Json> => expectStatus(await send("POST", t.token, "/channels", body, org), 201);
const channels = async (t: Member, org?: string): Promise<Json[]> => (await expectStatus(await get(t.token, "/channels?limit=100", org), 200)).items;
const subscriptions = async (t: Member, org?: string): Promise<Json[]> => (await expectStatus(await get(t.token, "/subscriptions?limit=100", org), 200)).items;
const emit = async (t: Member, body: Json, org?: string): Promise<Json> => expectStatus(await send("POST", t.token, "/events", body, org), 202);
const inApp = async (t: Member, org?: string) => (await channels(t, org)).find((c) => c.kind === "in_app")!;
/** A 404 body without its request id, to compare "not yours" with "never existed". */
const notFoundBody = async (res: Response) => {
  const { requestId, ...rest } = await expectProblem(res, 404);
  expect(requestId).toMatch(/^req_/);
  return rest;
};

describe("notifications", () => {
  describe("categories", () => {
    it("lists the static registry, readable by a viewer", async () => {
      const t = await seedTenant(h);
      const viewer = await seedMember(h, t.orgId, "viewer");
      const body = await expectStatus(await get(viewer.token, "/categories"), 200);
      const ids = body.items.map((c: Json) => c.id);
      for (const id of ["deploy.failed", "deploy.succeeded", "build.failed", "backup.failed", "domain.expiring", "certificate.expiring"]) {
        expect(ids).toContain(id);
      }
      for (const c of body.items) {
        expect(Object.keys(c).sort()).toEqual(["defaultEnabled", "description", "id", "label"]);
        expect(typeof c.defaultEnabled).toBe("boolean");
        expect(c.label.length).toBeGreaterThan(0);
      }
      expect(new Set(ids).size).toBe(ids.length);
    });
  });

  describe("channels", () => {
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
        const verified = await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200);
        expect(verified.verified).toBe(true);

        const renamed = await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { label: "renamed", enabled: false }), 200);
        expect(renamed).toMatchObject({ label: "renamed", enabled: false, verified: true });
        const same = await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { config: { webhookUrl: SLACK } }), 200);
        expect(same.verified).toBe(true);

        const moved = await expectStatus(
          await send("PATCH", t.token, `/channels/${c.id}`, { config: { webhookUrl: "https://hooks.slack.com/services/T0AAAA111/B0CCCC333/other" } }),
          200,
        );
        expect(moved.verified).toBe(false);
        expect(moved.config.webhookUrlHint).toBe("https://hooks.slack.com/services/T0AAAA111/B0CCCC333/…");
        const again = await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200);
        expect(again.verified).toBe(true);
      });

      it("a webhook URL change resets verified and keeps the signing secret", async () => {
        const t = await seedTenant(h);
        const c = await createChannel(t, { kind: "webhook", label: "hook", config: { url: "https://example.com/a", signingSecret: SECRET } });
        await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200);
        const moved = await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { config: { url: "https://example.com/b" } }), 200);
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
        expect((await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { config: {} }), 200)).verified).toBe(true);
        await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { verified: false }), 400, "verified");
        await expectProblem(await send("PATCH", t.token, `/channels/${c.id}`, { config: { url: "https://example.com" } }), 400, "config.url");
      });

      it("an invalid PATCH changes nothing", async () => {
        const t = await seedTenant(h);
        const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
        await expectStatus(await send("PATCH", t.token, `/channels/${c.id}`, { verified: true }), 200);
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
      const sub = await expectStatus(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true }), 200);
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

  describe("ownership and isolation", () => {
    it("another member's channel, subscription and delivery answer 404 exactly like unknown ids", async () => {
      const t = await seedTenant(h);
      const other = await seedMember(h, t.orgId, "admin");
      const theirs = await createChannel(other, { kind: "email", label: "theirs", config: { address: "o@example.com" } });
      const theirSub = (await subscriptions(other))[0]!;
      await emit(t, { category: "deploy.failed", title: "to everyone" });
      const theirDelivery = (await expectStatus(await get(other.token, "/deliveries"), 200)).items[0];
      expect(theirDelivery).toBeDefined();

      const unknown = {
        channel: newId("nch"),
        subscription: newId("nsub"),
        delivery: newId("ndlv"),
      };
      const pairs: Array<[string, string, string, unknown?]> = [
        ["PATCH", `/channels/${theirs.id}`, `/channels/${unknown.channel}`, { label: "mine now" }],
        ["DELETE", `/channels/${theirs.id}`, `/channels/${unknown.channel}`],
        ["POST", `/channels/${theirs.id}/test`, `/channels/${unknown.channel}/test`],
        ["DELETE", `/subscriptions/${theirSub.id}`, `/subscriptions/${unknown.subscription}`],
        ["POST", `/deliveries/${theirDelivery.id}/seen`, `/deliveries/${unknown.delivery}/seen`],
        ["GET", `/deliveries/${theirDelivery.id}`, `/deliveries/${unknown.delivery}`],
      ];
      for (const [method, foreign, missing, json] of pairs) {
        const a = await notFoundBody(await send(method, t.token, foreign, json));
        const b = await notFoundBody(await send(method, t.token, missing, json));
        expect(a, `${method} ${foreign}`).toEqual(b);
      }
      // Nothing of theirs changed.
      expect((await channels(other)).find((c) => c.id === theirs.id)).toMatchObject({ label: "theirs" });
      expect((await subscriptions(other)).some((s) => s.id === theirSub.id)).toBe(true);
      expect((await expectStatus(await get(other.token, "/deliveries/unseen-count"), 200)).count).toBe(1);
      // And the lists show only one's own.
      expect((await channels(t)).some((c) => c.id === theirs.id)).toBe(false);
      expect((await subscriptions(t)).every((s) => s.channelId !== theirSub.channelId)).toBe(true);
    });

    it("a subscription cannot point at another member's channel or an unknown one", async () => {
      const t = await seedTenant(h);
      const other = await seedMember(h, t.orgId, "member");
      const theirs = await inApp(other);
      for (const channelId of [theirs.id, newId("nch")]) {
        const p = await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId, enabled: true }), 400, "channelId");
        expect(p.detail).toContain("not one of your channels");
      }
      expect((await subscriptions(other)).filter((s) => s.category === "deploy.failed")).toHaveLength(1);
    });

    it("separates organizations: channels, subscriptions, defaults and the feed are per organization", async () => {
      const a = await seedTenant(h);
      const org2 = await expectStatus(await h.request("/api/orgs", { token: a.token, json: { name: "second" } }), 201);
      const c1 = await createChannel(a, { kind: "email", label: "org1", config: { address: "a@example.com" } });
      const in2 = await channels(a, org2.id);
      expect(in2.map((c) => c.kind)).toEqual(["in_app"]);
      await expectProblem(await send("PATCH", a.token, `/channels/${c1.id}`, { label: "x" }, org2.id), 404);
      await expectProblem(
        await send("PUT", a.token, "/subscriptions", { category: "deploy.failed", channelId: c1.id, enabled: true }, org2.id),
        400,
        "channelId",
      );

      await expectStatus(await send("PUT", a.token, "/defaults", { category: "member.joined", defaultEnabled: true }, org2.id), 200);
      const d1 = (await expectStatus(await get(a.token, "/defaults"), 200)).items.find((d: Json) => d.category === "member.joined");
      expect(d1).toEqual({ category: "member.joined", defaultEnabled: false, overridden: false });

      await emit(a, { category: "deploy.failed", title: "in org 2" }, org2.id);
      expect((await expectStatus(await get(a.token, "/deliveries/unseen-count"), 200)).count).toBe(0);
      expect((await expectStatus(await get(a.token, "/deliveries/unseen-count", org2.id), 200)).count).toBe(1);
      const entry = (await expectStatus(await get(a.token, "/deliveries", org2.id), 200)).items[0];
      await expectProblem(await send("POST", a.token, `/deliveries/${entry.id}/seen`), 404);

      // A stranger sees nothing and cannot name the organization.
      const stranger = await seedTenant(h);
      await expectProblem(await get(stranger.token, "/channels", a.orgId), 403);
      await expectProblem(await send("PATCH", stranger.token, `/channels/${c1.id}`, { label: "x" }), 404);
    });
  });

  describe("subscriptions", () => {
    it("seeds a joining member's grid on an in_app channel from the categories' defaults", async () => {
      const t = await seedTenant(h);
      const categories = (await expectStatus(await get(t.token, "/categories"), 200)).items as Json[];
      const channel = await inApp(t);
      expect(channel).toMatchObject({ kind: "in_app", enabled: true, verified: true });
      const subs = await subscriptions(t);
      expect(subs).toHaveLength(categories.length);
      for (const cat of categories) {
        const s = subs.find((x) => x.category === cat.id)!;
        expect(s, cat.id).toMatchObject({ channelId: channel.id, enabled: cat.defaultEnabled });
      }
    });

    it("PUT is an idempotent upsert on (category, channel)", async () => {
      const t = await seedTenant(h);
      const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
      const body = { category: "backup.failed", channelId: c.id, enabled: true };
      const first = await expectStatus(await send("PUT", t.token, "/subscriptions", body), 200);
      expect(first).toMatchObject(body);
      const second = await expectStatus(await send("PUT", t.token, "/subscriptions", body), 200);
      expect(second.id).toBe(first.id);
      const off = await expectStatus(await send("PUT", t.token, "/subscriptions", { ...body, enabled: false }), 200);
      expect(off).toMatchObject({ id: first.id, enabled: false });
      expect((await subscriptions(t)).filter((s) => s.channelId === c.id)).toHaveLength(1);
    });

    it("concurrent PUTs of the same cell leave exactly one row", async () => {
      const t = await seedTenant(h);
      const c = await createChannel(t, { kind: "email", label: "mail", config: { address: "a@example.com" } });
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => send("PUT", t.token, "/subscriptions", { category: "domain.expiring", channelId: c.id, enabled: i % 2 === 0 })),
      );
      const ids = new Set<string>();
      for (const r of results) ids.add((await expectStatus(r, 200)).id);
      expect(ids.size).toBe(1);
      const res = await h.db.execute(`select count(*)::int as n from notification_subscriptions where channel_id = '${c.id}'` as never);
      expect((res as unknown as { rows: { n: number }[] }).rows[0]!.n).toBe(1);
    });

    it("validates the body: category, channelId and a boolean enabled", async () => {
      const t = await seedTenant(h);
      const c = await inApp(t);
      const p = await expectProblem(
        await send("PUT", t.token, "/subscriptions", { category: "deploy.exploded", channelId: c.id, enabled: true }),
        400,
        "category",
      );
      expect(p.allowed).toContain("deploy.failed");
      await expectProblem(await send("PUT", t.token, "/subscriptions", { channelId: c.id, enabled: true }), 400, "category");
      await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", enabled: true }), 400, "channelId");
      await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id }), 400, "enabled");
      await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: "true" }), 400, "enabled");
      await expectProblem(await send("PUT", t.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true, extra: 1 }), 400, "extra");
    });

    it("DELETE removes one subscription; a repeat is 404", async () => {
      const t = await seedTenant(h);
      const sub = (await subscriptions(t))[0]!;
      expect((await send("DELETE", t.token, `/subscriptions/${sub.id}`)).status).toBe(204);
      expect((await subscriptions(t)).some((s) => s.id === sub.id)).toBe(false);
      await expectProblem(await send("DELETE", t.token, `/subscriptions/${sub.id}`), 404);
    });

    it("a viewer manages their own channels and subscriptions", async () => {
      const t = await seedTenant(h);
      const viewer = await seedMember(h, t.orgId, "viewer");
      const c = await createChannel(viewer, { kind: "email", label: "mine", config: { address: "v@example.com" } });
      await expectStatus(await send("PUT", viewer.token, "/subscriptions", { category: "deploy.failed", channelId: c.id, enabled: true }), 200);
    });
  });

  describe("org defaults", () => {
    it("reads with notifications:read, writes with notifications:admin", async () => {
      const t = await seedTenant(h);
      const viewer = await seedMember(h, t.orgId, "viewer");
      const member = await seedMember(h, t.orgId, "member");
      const list = await expectStatus(await get(viewer.token, "/defaults"), 200);
      const categories = (await expectStatus(await get(t.token, "/categories"), 200)).items as Json[];
      expect(list.items).toEqual(categories.map((c) => ({ category: c.id, defaultEnabled: c.defaultEnabled, overridden: false })));
      await expectProblem(await send("PUT", member.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 403);
      await expectProblem(await send("PUT", viewer.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 403);
      const put = await expectStatus(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 200);
      expect(put).toEqual({ category: "deploy.failed", defaultEnabled: false, overridden: true });
      const again = await expectStatus(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 200);
      expect(again).toEqual(put);
      const after = await expectStatus(await get(member.token, "/defaults"), 200);
      expect(after.items.find((d: Json) => d.category === "deploy.failed")).toEqual(put);
    });

    it("validates category and a boolean defaultEnabled", async () => {
      const t = await seedTenant(h);
      await expectProblem(await send("PUT", t.token, "/defaults", { category: "nope", defaultEnabled: true }), 400, "category");
      await expectProblem(await send("PUT", t.token, "/defaults", { defaultEnabled: true }), 400, "category");
      await expectProblem(await send("PUT", t.token, "/defaults", { category: "deploy.failed" }), 400, "defaultEnabled");
      await expectProblem(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: 1 }), 400, "defaultEnabled");
    });

    it("seed the grid of members who join afterwards (through an invitation too); existing grids are unchanged", async () => {
      const t = await seedTenant(h);
      const early = await seedMember(h, t.orgId, "member");
      await expectStatus(await send("PUT", t.token, "/defaults", { category: "deploy.failed", defaultEnabled: false }), 200);
      await expectStatus(await send("PUT", t.token, "/defaults", { category: "deploy.succeeded", defaultEnabled: true }), 200);

      const late = await seedMember(h, t.orgId, "member");
      const lateSubs = await subscriptions(late);
      expect(lateSubs.find((s) => s.category === "deploy.failed")!.enabled).toBe(false);
      expect(lateSubs.find((s) => s.category === "deploy.succeeded")!.enabled).toBe(true);
      expect(lateSubs.find((s) => s.category === "build.failed")!.enabled).toBe(true);
      const earlySubs = await subscriptions(early);
      expect(earlySubs.find((s) => s.category === "deploy.failed")!.enabled).toBe(true);

      const email = `${newId("inv")}@example.test`;
      const inv = await expectStatus(await h.request(`/api/orgs/${t.orgId}/invitations`, { token: t.token, json: { email, role: "viewer" } }), 201);
      const joined = await expectStatus(await h.request("/api/invitations/accept", { json: { code: inv.code, name: "Invited" } }), 200);
      const invited: Member = { userId: joined.user.id, email, token: joined.token, orgId: t.orgId };
      const invitedChannels = await channels(invited);
      expect(invitedChannels).toHaveLength(1);
      expect(invitedChannels[0]).toMatchObject({ kind: "in_app", verified: true, enabled: true });
      const invitedSubs = await subscriptions(invited);
      expect(invitedSubs.find((s) => s.category === "deploy.failed")!.enabled).toBe(false);
      expect(invitedSubs.find((s) => s.category === "deploy.succeeded")!.enabled).toBe(true);
    });
  });

  describe("events and the in-app feed", () => {
    it("fans an event out to members with an enabled subscription on an enabled, verified channel", async () => {
      const t = await seedTenant(h);
      const yes = await seedMember(h, t.orgId, "member");
      const unsubscribed = await seedMember(h, t.orgId, "viewer");
      const disabledChannel = await seedMember(h, t.orgId, "member");
      const outsider = await seedTenant(h);

      const sub = (await subscriptions(unsubscribed)).find((s) => s.category === "build.failed")!;
      await expectStatus(await send("PUT", unsubscribed.token, "/subscriptions", { category: "build.failed", channelId: sub.channelId, enabled: false }), 200);
      const bell = await inApp(disabledChannel);
      await expectStatus(await send("PATCH", disabledChannel.token, `/channels/${bell.id}`, { enabled: false }), 200);

      const result = await emit(t, { category: "build.failed", title: "Build 42 failed", message: "exit code 1", projectId: "prj_1", data: { build: 42 } });
      expect(result).toMatchObject({ recipients: 2, sends: 0 });
      expect(result.eventId).toMatch(/^nevt_/);
      for (const m of [t, yes]) expect((await expectStatus(await get(m.token, "/deliveries/unseen-count"), 200)).count).toBe(1);
      for (const m of [unsubscribed, disabledChannel, outsider])
        expect((await expectStatus(await get(m.token, "/deliveries/unseen-count"), 200)).count).toBe(0);

      const entry = (await expectStatus(await get(yes.token, "/deliveries"), 200)).items[0];
      expect(entry).toMatchObject({
        eventId: result.eventId,
        category: "build.failed",
        title: "Build 42 failed",
        message: "exit code 1",
        projectId: "prj_1",
        data: { build: 42 },
        seen: false,
        seenAt: null,
        sends: [],
      });

      // A category nobody subscribes to by default reaches nobody.
      expect(await emit(t, { category: "deploy.succeeded", title: "shipped" })).toMatchObject({ recipients: 0, sends: 0 });
    });

    it("a removed member is not told", async () => {
      const t = await seedTenant(h);
      const gone = await seedMember(h, t.orgId, "member");
      expect((await h.request(`/api/orgs/${t.orgId}/members/${gone.userId}`, { method: "DELETE", token: t.token })).status).toBe(204);
      expect(await emit(t, { category: "deploy.failed", title: "after removal" })).toMatchObject({ recipients: 1 });
    });

    it("validates events and needs notifications:admin", async () => {
      const t = await seedTenant(h);
      const member = await seedMember(h, t.orgId, "member");
      await expectProblem(await send("POST", member.token, "/events", { category: "deploy.failed", title: "x" }), 403);
      await expectProblem(await send("POST", t.token, "/events", { category: "deploy.kaboom", title: "x" }), 400, "category");
      await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed" }), 400, "title");
      await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: " " }), 400, "title");
      await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: "x", data: [1] }), 400, "data");
      await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: "x", data: { big: "x".repeat(17_000) } }), 400, "data");
      await expectProblem(await send("POST", t.token, "/events", { category: "deploy.failed", title: "x", severity: "high" }), 400, "severity");
      expect((await expectStatus(await get(t.token, "/deliveries/unseen-count"), 200)).count).toBe(0);
    });

    it("lists newest first with unseen, limit and cursor; seen is idempotent and the count drops", async () => {
      const t = await seedTenant(h);
      for (let i = 1; i <= 3; i++) await emit(t, { category: "deploy.failed", title: `failure ${i}` });
      const all = await expectStatus(await get(t.token, "/deliveries"), 200);
      expect(all.items.map((d: Json) => d.title)).toEqual(["failure 3", "failure 2", "failure 1"]);
      expect(all.nextCursor).toBeNull();

      const page = await expectStatus(await get(t.token, "/deliveries?limit=2"), 200);
      expect(page.items).toHaveLength(2);
      const rest = await expectStatus(await get(t.token, `/deliveries?limit=2&cursor=${page.nextCursor}`), 200);
      expect(rest.items.map((d: Json) => d.title)).toEqual(["failure 1"]);

      expect((await expectStatus(await get(t.token, "/deliveries/unseen-count"), 200)).count).toBe(3);
      const target = all.items[1];
      const seen = await expectStatus(await send("POST", t.token, `/deliveries/${target.id}/seen`), 200);
      expect(seen).toMatchObject({ id: target.id, seen: true });
      expect(seen.seenAt).toEqual(expect.any(String));
      const repeat = await expectStatus(await send("POST", t.token, `/deliveries/${target.id}/seen`), 200);
      expect(repeat.seenAt).toBe(seen.seenAt);
      expect((await expectStatus(await get(t.token, "/deliveries/unseen-count"), 200)).count).toBe(2);

      const unseen = await expectStatus(await get(t.token, "/deliveries?unseen=true"), 200);
      expect(unseen.items.map((d: Json) => d.title)).toEqual(["failure 3", "failure 1"]);
      const seenOnly = await expectStatus(await get(t.token, "/deliveries?unseen=false"), 200);
      expect(seenOnly.items.map((d: Json) => d.title)).toEqual(["failure 2"]);
      const one = await expectStatus(await get(t.token, "/deliveries?unseen=true&limit=1"), 200);
      expect(one.items.map((d: Json) => d.title)).toEqual(["failure 3"]);

      const detail = await expectStatus(await get(t.token, `/deliveries/${target.id}`), 200);
      expect(detail).toMatchObject({ id: target.id, title: "failure 2", seen: true, sends: [] });

      await expectProblem(await get(t.token, "/deliveries?unseen=maybe"), 400, "unseen");
      await expectProblem(await get(t.token, "/deliveries?limit=101"), 400, "limit");
      await expectProblem(await get(t.token, "/deliveries?limit=abc"), 400, "limit");
    });
  });
});
