/** One send to one channel: builds the kind's payload and hands it to the injected transport. */
import type { Keyring } from "../../../shared/crypto/keyring";
import type { ChannelKind } from "../../../shared/db/schema";
import type { Mailer, Outbound, OutboundResult } from "../../../shared/outbound/types";
import { teamsFormat } from "../channel-config";
import { decryptSecrets } from "../secrets";
import { discordBody, emailMessage, slackBody, teamsBody, webhookBody, type NotificationMessage } from "./payloads";
import { webhookHeaders } from "./signing";

export interface Transports {
  outbound: Outbound;
  /** Absent when the deployment has no e-mail configured. */
  mailer?: Mailer;
}

export interface SendableChannel {
  id: string;
  orgId: string;
  kind: ChannelKind;
  config: Record<string, unknown>;
  secretCiphertext: string | null;
}

const USER_AGENT = "WorkspaceNotifications/1.0";

const fail = (error: string): OutboundResult => ({ ok: false, retryable: false, error });

const json = (url: string, body: unknown, extra: Record<string, string> = {}) => ({
  url,
  headers: { "content-type": "application/json", "user-agent": USER_AGENT, ...extra },
  body: typeof body === "string" ? body : JSON.stringify(body),
});

/**
 * Sends `message` to `channel`. `messageId` is the webhook-id (the outbox row id:
 * the same on every retry); `now` is this attempt's time (webhook-timestamp).
 */
export async function sendToChannel(
  channel: SendableChannel,
  message: NotificationMessage,
  messageId: string,
  now: Date,
  keyring: Keyring,
  transports: Transports,
): Promise<OutboundResult> {
  if (channel.kind === "in_app") return { ok: true, status: 200 };
  if (channel.kind === "email") {
    if (!transports.mailer) return fail("E-mail delivery is not configured on this server");
    return transports.mailer.send(emailMessage(message, String(channel.config.address)));
  }
  const secrets = await decryptSecrets(keyring, channel);
  if (channel.kind === "webhook") {
    if (!secrets?.signingSecret) return fail("The channel's signing secret cannot be read; save the channel's config again");
    const body = webhookBody(message);
    return transports.outbound.send(json(String(channel.config.url), body, webhookHeaders(secrets.signingSecret, messageId, now, body)));
  }
  if (!secrets?.webhookUrl) return fail("The channel's webhook URL cannot be read; save the channel's config again");
  switch (channel.kind) {
    case "slack":
      return transports.outbound.send(json(secrets.webhookUrl, slackBody(message)));
    case "discord":
      return transports.outbound.send(json(secrets.webhookUrl, discordBody(message)));
    case "msteams":
      return transports.outbound.send(json(secrets.webhookUrl, teamsBody(message, teamsFormat(new URL(secrets.webhookUrl)) ?? "workflow")));
  }
}
