/**
 * What each channel kind receives, in each provider's own format:
 * - webhook: Standard Webhooks JSON `{type, timestamp, data}` (signed by the sender).
 * - slack: an incoming-webhook message with Block Kit blocks and a `text` fallback.
 * - discord: an execute-webhook body with one embed; mentions disabled so event text cannot ping anyone.
 * - msteams: an Adaptive Card message for workflow URLs, a MessageCard for legacy connector URLs.
 * - email: a plain-text and an HTML part.
 */
import type { EmailMessage } from "../../../shared/outbound/types";
import type { TeamsFormat } from "../channel-config";

export interface NotificationMessage {
  eventId: string;
  organizationId: string;
  category: string;
  categoryLabel: string;
  title: string;
  message: string | null;
  projectId: string | null;
  data: Record<string, unknown> | null;
  createdAt: Date;
}

type Tone = "danger" | "warning" | "good" | "info";

function toneOf(category: string): Tone {
  if (/(failed|crashed|misconfigured)$/.test(category)) return "danger";
  if (/(expiring|approaching)$/.test(category)) return "warning";
  if (/(succeeded|joined)$/.test(category)) return "good";
  return "info";
}

const HEX: Record<Tone, string> = { danger: "D13438", warning: "F2A900", good: "2EB67D", info: "4F6BED" };

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const oneLine = (text: string) => text.replace(/[\r\n]+/g, " ").trim();

function facts(m: NotificationMessage): Array<[string, string]> {
  const out: Array<[string, string]> = [["Category", m.categoryLabel]];
  if (m.projectId) out.push(["Project", m.projectId]);
  return out;
}

export function webhookBody(m: NotificationMessage): string {
  return JSON.stringify({
    type: m.category,
    timestamp: m.createdAt.toISOString(),
    data: {
      eventId: m.eventId,
      organizationId: m.organizationId,
      category: m.category,
      title: m.title,
      message: m.message,
      projectId: m.projectId,
      data: m.data,
      createdAt: m.createdAt.toISOString(),
    },
  });
}

/** Slack mrkdwn treats &, < and > as control characters. */
const slackEscape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export function slackBody(m: NotificationMessage): Record<string, unknown> {
  const blocks: unknown[] = [{ type: "header", text: { type: "plain_text", text: clip(oneLine(m.title), 150), emoji: false } }];
  if (m.message) blocks.push({ type: "section", text: { type: "mrkdwn", text: clip(slackEscape(m.message), 3000) } });
  blocks.push({
    type: "context",
    elements: facts(m).map(([name, value]) => ({ type: "mrkdwn", text: `*${name}:* ${slackEscape(value)}` })),
  });
  return { text: clip(slackEscape(oneLine(m.title)), 3000), blocks };
}

export function discordBody(m: NotificationMessage): Record<string, unknown> {
  return {
    allowed_mentions: { parse: [] },
    embeds: [
      {
        title: clip(oneLine(m.title), 256),
        ...(m.message ? { description: clip(m.message, 4096) } : {}),
        color: parseInt(HEX[toneOf(m.category)], 16),
        timestamp: m.createdAt.toISOString(),
        fields: facts(m).map(([name, value]) => ({ name, value: clip(value, 1024), inline: true })),
        footer: { text: "Workspace notifications" },
      },
    ],
  };
}

export function teamsBody(m: NotificationMessage, format: TeamsFormat): Record<string, unknown> {
  if (format === "connector") {
    return {
      "@type": "MessageCard",
      "@context": "https://schema.org/extensions",
      summary: clip(oneLine(m.title), 200),
      themeColor: HEX[toneOf(m.category)],
      title: oneLine(m.title),
      ...(m.message ? { text: m.message } : {}),
      sections: [{ facts: facts(m).map(([name, value]) => ({ name, value })) }],
    };
  }
  const body: unknown[] = [
    {
      type: "TextBlock",
      text: oneLine(m.title),
      weight: "Bolder",
      size: "Medium",
      wrap: true,
      color: toneOf(m.category) === "danger" ? "Attention" : "Default",
    },
  ];
  if (m.message) body.push({ type: "TextBlock", text: m.message, wrap: true });
  body.push({ type: "FactSet", facts: facts(m).map(([title, value]) => ({ title, value })) });
  return {
    type: "message",
    attachments: [
      {
        contentType: "application/vnd.microsoft.card.adaptive",
        contentUrl: null,
        content: { $schema: "http://adaptivecards.io/schemas/adaptive-card.json", type: "AdaptiveCard", version: "1.4", body },
      },
    ],
  };
}

const htmlEscape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");

export function emailMessage(m: NotificationMessage, to: string): EmailMessage {
  const title = oneLine(m.title);
  const lines = [title, "", ...(m.message ? [m.message, ""] : []), ...facts(m).map(([n, v]) => `${n}: ${v}`), `Time: ${m.createdAt.toISOString()}`];
  const footer = `You receive this because this address is subscribed to "${m.categoryLabel}" notifications.`;
  const html = [
    `<h2>${htmlEscape(title)}</h2>`,
    ...(m.message ? [`<p>${htmlEscape(m.message).replace(/\n/g, "<br>")}</p>`] : []),
    `<table>${facts(m)
      .map(([n, v]) => `<tr><th align="left">${htmlEscape(n)}</th><td>${htmlEscape(v)}</td></tr>`)
      .join("")}</table>`,
    `<p style="color:#666">${htmlEscape(footer)}</p>`,
  ].join("\n");
  return { to, subject: clip(title, 200), text: [...lines, "", footer].join("\n"), html };
}
