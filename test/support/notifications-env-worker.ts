/**
 * The notification suites' environment on the Worker (inside workerd). workerd
 * cannot listen on a socket and this project's worker test setup starts no
 * loopback receivers, so the "internet" is in the isolate: the Worker's own
 * fetch transport and HTTP e-mail API client run unchanged, with `fetch`
 * dispatching by URL to recording receivers. Delivery runs through the
 * Worker's real paths: waitUntil after an event, and the `scheduled` handler.
 */
import { createEmailApiMailer } from "../../shared/outbound/email-api";
import { createFetchOutbound } from "../../shared/outbound/fetch";
import { settleWith, TEST_POLICY, TEST_TIMEOUT_MS, type NotificationsEnv, type TestReceiver } from "./notifications-env";
import { fetchReceiver, providerUrls, Recorder, type Reply } from "./receiver-core";
import { openWorkerHarness, type WorkerHarness } from "./worker-harness";

export const EMAIL_API_URL = "https://api.email.test/emails";

/** Opens the environment and its Worker harness. */
export async function openWorkerNotificationsEnv(): Promise<{ env: NotificationsEnv; harness: WorkerHarness }> {
  const routes = new Map<string, Recorder>(); // exact URL or origin -> receiver
  const mailbox = new Recorder([], { status: 200, body: '{"id":"email_1"}' });
  routes.set(new URL(EMAIL_API_URL).origin, mailbox);
  let count = 0;

  const internet = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    const recorder = routes.get(new URL(url).toString()) ?? routes.get(new URL(url).origin);
    if (!recorder) throw new TypeError("fetch failed: no route in the test internet");
    return fetchReceiver(recorder)(url, init ?? {});
  };

  const h = await openWorkerHarness({
    outbound: createFetchOutbound({ fetch: internet, timeoutMs: TEST_TIMEOUT_MS }),
    mailer: createEmailApiMailer({
      apiKey: "re_test_key",
      url: EMAIL_API_URL,
      from: "Workspace <notifications@workspace.test>",
      fetch: internet,
      timeoutMs: TEST_TIMEOUT_MS,
    }),
    policy: TEST_POLICY,
  });
  const deliver = () => h.scheduled();

  const env: NotificationsEnv = {
    mailTransport: "email-api",
    async receiver(script?: Reply[], fallback?: Reply): Promise<TestReceiver> {
      count++;
      const recorder = new Recorder(script, fallback);
      const origin = `https://receiver-${count}.hooks.test`;
      routes.set(origin, recorder);
      const urls = providerUrls(String(count));
      for (const url of Object.values(urls)) routes.set(new URL(url).toString(), recorder);
      return {
        recorder,
        webhookUrl: `${origin}/hooks/incoming`,
        slackUrl: urls.slack,
        discordUrl: urls.discord,
        teamsWorkflowUrl: urls.teamsWorkflow,
        teamsConnectorUrl: urls.teamsConnector,
      };
    },
    emails: () =>
      mailbox.hits.map((hit) => {
        const body = JSON.parse(hit.body) as { to: string[]; subject: string; text: string };
        return { to: body.to, subject: body.subject, text: body.text };
      }),
    deliver,
    settle: (orgId, timeoutMs) => settleWith(deliver, () => h.db, orgId, timeoutMs),
  };
  return { env, harness: h };
}
