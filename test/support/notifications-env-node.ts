/**
 * The notification suites' environment on the Node adapter: real loopback
 * receivers (node:http), a real SMTP server, the Node outbound transport with
 * private addresses allowed (its loopback receivers), and the delivery engine.
 * Provider URLs (hooks.slack.com, discord.com, …) are routed to loopback
 * receivers: only the internet is mocked.
 */
import { afterAll } from "vitest";
import { jsonLogger } from "../../shared/http/logger";
import { createNodeOutbound } from "../../shared/outbound/node";
import { createSmtpMailer } from "../../shared/outbound/smtp";
import type { Mailer, Outbound } from "../../shared/outbound/types";
import { createDeliveryEngine, type DeliveryEngine } from "../../functions/notifications/delivery/engine";
import type { Harness, HarnessFactory } from "./harness";
import type { HarnessServices } from "./node-harness";
import { settleWith, TEST_POLICY, TEST_TIMEOUT_MS, type NotificationsEnv, type TestReceiver } from "./notifications-env";
import { providerUrls, type Reply } from "./receiver-core";
import { ROUTED_PREFIX, startHttpReceiver, startSmtpReceiver, type HttpReceiver, type SmtpReceiver } from "./receivers";

const normalize = (url: string) => new URL(url).toString();

export function nodeNotificationsEnv(makeHarness: (extras: HarnessServices) => HarnessFactory): NotificationsEnv & { harness: HarnessFactory } {
  const receivers: HttpReceiver[] = [];
  const routes = new Map<string, string>(); // provider URL -> receiver origin
  let smtp: SmtpReceiver | undefined;
  let engine: DeliveryEngine | undefined;
  let h: Harness | undefined;
  let smtpMailer: (Mailer & { close(): void }) | undefined;

  const direct = createNodeOutbound({ allowPrivate: true, timeoutMs: TEST_TIMEOUT_MS });
  const outbound: Outbound = {
    send(request) {
      const url = new URL(request.url);
      const origin = routes.get(normalize(request.url));
      if (origin) return direct.send({ ...request, url: `${origin}${ROUTED_PREFIX}${encodeURIComponent(url.host)}${url.pathname}${url.search}` });
      // Never reach the real internet from a test.
      if (url.hostname !== "127.0.0.1") return Promise.resolve({ ok: false, retryable: true, error: "Could not connect to the destination (ENOTFOUND)" });
      return direct.send(request);
    },
  };
  // The mailer exists before the SMTP server listens; it is created on first use.
  const mailer: Mailer = { send: (m) => smtpMailer!.send(m) };
  const base = makeHarness({ outbound, mailer, wakeDeliveries: () => {} });

  const harness: HarnessFactory = Object.assign(
    async () => {
      smtp = await startSmtpReceiver();
      smtpMailer = createSmtpMailer({ url: smtp.url, from: "Workspace <notifications@workspace.test>", timeoutMs: TEST_TIMEOUT_MS });
      h = await base();
      const logs = h.logs;
      engine = createDeliveryEngine({ db: h.db, keyring: h.keyring, transports: { outbound, mailer }, logger: jsonLogger((l) => logs.push(l)), policy: TEST_POLICY });
      return h;
    },
    { realConcurrency: base.realConcurrency },
  );

  afterAll(async () => {
    await engine?.stop();
    smtpMailer?.close();
    await smtp?.close();
    for (const r of receivers) await r.close();
  });

  const deliver = async () => {
    await engine!.drain({ budgetMs: 20_000 });
  };

  return {
    mailTransport: "smtp",
    harness,
    async receiver(script?: Reply[], fallback?: Reply): Promise<TestReceiver> {
      const r = await startHttpReceiver(script, fallback);
      receivers.push(r);
      const urls = providerUrls(String(receivers.length));
      for (const url of Object.values(urls)) routes.set(normalize(url), r.origin);
      return {
        recorder: r.recorder,
        webhookUrl: `${r.origin}/hooks/incoming`,
        slackUrl: urls.slack,
        discordUrl: urls.discord,
        teamsWorkflowUrl: urls.teamsWorkflow,
        teamsConnectorUrl: urls.teamsConnector,
      };
    },
    emails: () => (smtp?.messages ?? []).map((m) => ({ to: m.to, subject: m.subject, text: m.text })),
    deliver,
    settle: (orgId, timeoutMs) => settleWith(deliver, () => h!.db, orgId, timeoutMs),
  };
}
