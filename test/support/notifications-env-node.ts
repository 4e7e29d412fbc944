/**
 * The notification suites' environment on the Node adapter: real loopback
 * receivers (node:http), a real SMTP server, the Node outbound transport with
 * private addresses allowed (its loopback receivers), and the delivery engine.
 * Provider URLs (hooks.slack.com, discord.com, …) are routed to loopback
 * receivers: only the internet is mocked.
 */
import { jsonLogger } from "../../shared/http/logger";
import { createNodeOutbound } from "../../shared/outbound/node";
import { createSmtpMailer } from "../../shared/outbound/smtp";
import type { Outbound } from "../../shared/outbound/types";
import { createDeliveryEngine } from "../../functions/notifications/delivery/engine";
import type { Harness } from "./harness";
import { openPgliteHarness, openPostgresHarness, type HarnessServices } from "./node-harness";
import { settleWith, TEST_POLICY, TEST_TIMEOUT_MS, type NotificationsEnv, type TestReceiver } from "./notifications-env";
import { providerUrls, type Reply } from "./receiver-core";
import { ROUTED_PREFIX, startHttpReceiver, startSmtpReceiver, type HttpReceiver } from "./receivers";

const normalize = (url: string) => new URL(url).toString();

/** Opens the environment and its harness (whose close also stops the engine, the receivers and the SMTP server). */
export async function openNodeNotificationsEnv(runtime: "node-pglite" | "node-postgres"): Promise<{ env: NotificationsEnv; harness: Harness }> {
  const receivers: HttpReceiver[] = [];
  const routes = new Map<string, string>(); // provider URL -> receiver origin

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
  const smtp = await startSmtpReceiver();
  const mailer = createSmtpMailer({ url: smtp.url, from: "Workspace <notifications@workspace.test>", timeoutMs: TEST_TIMEOUT_MS });
  const services: HarnessServices = { outbound, mailer, wakeDeliveries: () => {} };
  const h = runtime === "node-pglite" ? await openPgliteHarness(services) : await openPostgresHarness(services);
  const logs = h.logs;
  const engine = createDeliveryEngine({
    db: h.db,
    keyring: h.keyring,
    transports: { outbound, mailer },
    logger: jsonLogger((l) => logs.push(l)),
    policy: TEST_POLICY,
  });

  const closeHarness = h.close;
  h.close = async () => {
    await engine.stop();
    await closeHarness();
    mailer.close();
    await smtp.close();
    for (const r of receivers) await r.close();
  };

  const deliver = async () => {
    await engine.drain({ budgetMs: 20_000 });
  };

  const env: NotificationsEnv = {
    mailTransport: "smtp",
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
    emails: () => smtp.messages.map((m) => ({ to: m.to, subject: m.subject, text: m.text })),
    deliver,
    settle: (orgId, timeoutMs) => settleWith(deliver, () => h.db, orgId, timeoutMs),
  };
  return { env, harness: h };
}
