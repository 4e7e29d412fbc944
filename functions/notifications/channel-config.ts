/**
 * Per-kind channel configuration: validation (the spec's per-kind rules), the
 * split into a displayable part and a secret part, and the read view.
 *
 * | kind    | config                                   | shown as                                      |
 * |---------|------------------------------------------|-----------------------------------------------|
 * | email   | `{address}`                              | `{address}`                                   |
 * | webhook | `{url, signingSecret?}` (http or https)  | `{url, signingSecretConfigured}`              |
 * | slack   | `{webhookUrl}` on hooks.slack.com        | `{webhookUrlConfigured, webhookUrlHint}`      |
 * | discord | `{webhookUrl}` on Discord's webhook path | `{webhookUrlConfigured, webhookUrlHint}`      |
 * | msteams | `{webhookUrl}` workflow or connector URL | `{webhookUrlConfigured, format}`              |
 * | in_app  | `{}`                                     | `{}`                                          |
 *
 * `url` is accepted for `webhookUrl` (and `webhookUrl` for `url`), `secret` for
 * `signingSecret`. Secrets (chat URLs, signing secrets) are encrypted and never
 * returned in full; a webhook's signing secret is generated (`whsec_` + 32
 * random bytes, base64) when none is given, and shown once in the create response.
 */
import { z } from "@hono/zod-openapi";
import { randomBytes } from "../../shared/crypto/encoding";
import { fromBase64, toBase64 } from "./delivery/signing";
import type { ChannelKind } from "../../shared/db/schema";
import { badRequest } from "../../shared/http/errors";
import { issueToError } from "../../shared/http/validation";

export interface ChannelSecrets {
  webhookUrl?: string;
  signingSecret?: string;
}

export interface ParsedConfig {
  publicConfig: Record<string, unknown>;
  secrets: ChannelSecrets | null;
  /** A signing secret generated for this request (to show once). */
  generatedSecret?: string;
}

export type TeamsFormat = "workflow" | "connector";

const MAX_URL = 2048;

const UrlField = z.string().max(MAX_URL);
/** The component name of each kind's config in the OpenAPI document. */
export const CHANNEL_CONFIG_NAMES: Record<ChannelKind, string> = {
  email: "EmailChannelConfig",
  webhook: "WebhookChannelConfig",
  slack: "SlackChannelConfig",
  discord: "DiscordChannelConfig",
  msteams: "TeamsChannelConfig",
  in_app: "InAppChannelConfig",
};

const chatConfig = (kind: "slack" | "discord" | "msteams", where: string) =>
  z
    .strictObject({
      webhookUrl: UrlField.optional().openapi({ description: `Required (or \`url\`): ${where}. Stored encrypted, never returned.` }),
      url: UrlField.optional().openapi({ description: "Alias of `webhookUrl` (send one of them)" }),
    })
    .openapi(CHANNEL_CONFIG_NAMES[kind]);

/** Each kind's config shape: validated here and published in the OpenAPI document (one source). */
export const CHANNEL_CONFIGS = {
  email: z.strictObject({ address: z.email().max(254).openapi({ description: "Where the messages go" }) }).openapi(CHANNEL_CONFIG_NAMES.email),
  webhook: z
    .strictObject({
      url: UrlField.optional().openapi({ description: "Required (or `webhookUrl`): the http or https endpoint that receives the POSTs" }),
      webhookUrl: UrlField.optional().openapi({ description: "Alias of `url` (send one of them)" }),
      signingSecret: z
        .string()
        .max(200)
        .optional()
        .openapi({ description: "`whsec_` + base64 of 24-64 bytes; generated when omitted (shown once), kept on a PATCH that omits it" }),
      secret: z.string().max(200).optional().openapi({ description: "Alias of `signingSecret`" }),
    })
    .openapi(CHANNEL_CONFIG_NAMES.webhook),
  slack: chatConfig("slack", "a Slack incoming-webhook URL, https://hooks.slack.com/services/…"),
  discord: chatConfig("discord", "a Discord webhook URL, https://discord.com/api/webhooks/<id>/<token>"),
  msteams: chatConfig(
    "msteams",
    "a Teams workflow URL (https://….logic.azure.com/…/workflows/… or ….api.powerplatform.com/…/workflows/…) or a connector URL (https://….webhook.office.com/webhookb2/…)",
  ),
  in_app: z.strictObject({}).openapi(CHANNEL_CONFIG_NAMES.in_app),
} satisfies Record<ChannelKind, z.ZodType>;

function validate<T>(schema: z.ZodType<T>, raw: unknown): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues.find((i) => i.code === "unrecognized_keys") ?? parsed.error.issues[0]!;
  throw issueToError({ ...issue, path: ["config", ...issue.path] } as never, "json");
}

/** The URL sent as `webhookUrl` or `url` (one of them), and the field name to blame. */
function pickUrl(body: { url?: string; webhookUrl?: string }, canonical: "url" | "webhookUrl"): { value: string; field: string } {
  if (body.url !== undefined && body.webhookUrl !== undefined) throw badRequest("config.url", "Send either config.url or config.webhookUrl, not both");
  const field = body.webhookUrl !== undefined ? "config.webhookUrl" : body.url !== undefined ? "config.url" : `config.${canonical}`;
  const value = body.webhookUrl ?? body.url;
  if (value === undefined) throw badRequest(field, `${field} is required`);
  return { value: value.trim(), field };
}

function parseUrl(value: string, field: string, protocols: string[]): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(field, `${field} must be an absolute URL`);
  }
  if (!protocols.includes(url.protocol)) throw badRequest(field, `${field} must be ${protocols.map((p) => p.slice(0, -1)).join(" or ")}`);
  if (url.username || url.password) throw badRequest(field, `${field} must not carry credentials`);
  if (!url.hostname) throw badRequest(field, `${field} must name a host`);
  return url;
}

const pathParts = (url: URL) => url.pathname.split("/").filter(Boolean);

const SLACK_HOSTS = new Set(["hooks.slack.com"]);
const DISCORD_HOSTS = new Set(["discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com"]);

function slackUrl(value: string, field: string): URL {
  const url = parseUrl(value, field, ["https:"]);
  const parts = pathParts(url);
  if (!SLACK_HOSTS.has(url.hostname) || url.port || parts[0] !== "services" || parts.length !== 4) {
    throw badRequest(field, `${field} must be a Slack incoming-webhook URL (https://hooks.slack.com/services/…)`);
  }
  return url;
}

function discordUrl(value: string, field: string): URL {
  const url = parseUrl(value, field, ["https:"]);
  let parts = pathParts(url);
  if (parts[0] === "api" && /^v\d+$/.test(parts[1] ?? "")) parts = ["api", ...parts.slice(2)];
  if (!DISCORD_HOSTS.has(url.hostname) || url.port || parts[0] !== "api" || parts[1] !== "webhooks" || parts.length !== 4 || !/^\d+$/.test(parts[2]!)) {
    throw badRequest(field, `${field} must be a Discord webhook URL (https://discord.com/api/webhooks/<id>/<token>)`);
  }
  return url;
}

/** Workflow URLs (Power Automate / Logic Apps) get an Adaptive Card; legacy connector URLs a MessageCard. */
export function teamsFormat(url: URL): TeamsFormat | null {
  if (url.protocol !== "https:" || (url.port && url.port !== "443")) return null;
  const host = url.hostname;
  const path = url.pathname;
  if ((host.endsWith(".logic.azure.com") || host.endsWith(".api.powerplatform.com")) && path.includes("/workflows/")) return "workflow";
  if (host.endsWith(".webhook.office.com") && path.startsWith("/webhookb2/")) return "connector";
  if ((host === "outlook.office.com" || host === "outlook.office365.com") && path.startsWith("/webhook/")) return "connector";
  return null;
}

function teamsUrl(value: string, field: string): URL {
  const url = parseUrl(value, field, ["https:"]);
  if (!teamsFormat(url)) {
    throw badRequest(
      field,
      `${field} must be a Microsoft Teams workflow URL (https://….logic.azure.com/workflows/… or ….api.powerplatform.com/…/workflows/…) or a connector URL (https://….webhook.office.com/webhookb2/…)`,
    );
  }
  return url;
}

/** The URL without its last path segment (the secret part of Slack and Discord URLs). */
function hint(url: URL): string {
  const parts = pathParts(url);
  return `${url.origin}/${parts.slice(0, -1).join("/")}/…`;
}

function signingSecret(value: string, field: string): string {
  const trimmed = value.trim();
  const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(trimmed);
  let bytes = 0;
  try {
    bytes = m ? fromBase64(m[1]!).length : 0;
  } catch {
    bytes = 0;
  }
  if (bytes < 24 || bytes > 64) throw badRequest(field, `${field} must be whsec_ followed by 24 to 64 base64-encoded bytes`);
  return trimmed;
}

export const generateSigningSecret = () => `whsec_${toBase64(randomBytes(32))}`;

/**
 * Validates `raw` for `kind`. `existing` are the channel's current secrets on a
 * PATCH: a webhook config without a signing secret keeps the current one.
 */
export function parseChannelConfig(kind: ChannelKind, raw: unknown, existing?: ChannelSecrets | null): ParsedConfig {
  if (raw === undefined) {
    if (kind === "in_app") return { publicConfig: {}, secrets: null };
    throw badRequest("config", "config is required");
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw badRequest("config", "config must be an object");
  switch (kind) {
    case "in_app":
      validate(CHANNEL_CONFIGS.in_app, raw);
      return { publicConfig: {}, secrets: null };
    case "email": {
      const { address } = validate(CHANNEL_CONFIGS.email, raw);
      return { publicConfig: { address: address.trim() }, secrets: null };
    }
    case "webhook": {
      const body = validate(CHANNEL_CONFIGS.webhook, raw);
      const { value, field } = pickUrl(body, "url");
      const url = parseUrl(value, field, ["https:", "http:"]);
      if (body.signingSecret !== undefined && body.secret !== undefined)
        throw badRequest("config.secret", "Send either config.signingSecret or config.secret, not both");
      const sent = body.signingSecret ?? body.secret;
      const secretField = body.secret !== undefined ? "config.secret" : "config.signingSecret";
      const publicConfig = { url: url.toString(), signingSecretConfigured: true };
      if (sent !== undefined) return { publicConfig, secrets: { signingSecret: signingSecret(sent, secretField) } };
      if (existing?.signingSecret) return { publicConfig, secrets: { signingSecret: existing.signingSecret } };
      const generated = generateSigningSecret();
      return { publicConfig, secrets: { signingSecret: generated }, generatedSecret: generated };
    }
    case "slack":
    case "discord": {
      const { value, field } = pickUrl(validate(CHANNEL_CONFIGS[kind], raw), "webhookUrl");
      const url = kind === "slack" ? slackUrl(value, field) : discordUrl(value, field);
      return { publicConfig: { webhookUrlConfigured: true, webhookUrlHint: hint(url) }, secrets: { webhookUrl: url.toString() } };
    }
    case "msteams": {
      const { value, field } = pickUrl(validate(CHANNEL_CONFIGS[kind], raw), "webhookUrl");
      const url = teamsUrl(value, field);
      return { publicConfig: { webhookUrlConfigured: true, format: teamsFormat(url) }, secrets: { webhookUrl: url.toString() } };
    }
  }
}

/** True when two configs (displayable part and secrets) differ: the destination may have moved. */
export function configChanged(a: { publicConfig: Record<string, unknown>; secrets: ChannelSecrets | null }, b: typeof a): boolean {
  const canon = (x: typeof a) => JSON.stringify([sortKeys(x.publicConfig), sortKeys((x.secrets ?? {}) as Record<string, unknown>)]);
  return canon(a) !== canon(b);
}

function sortKeys(o: Record<string, unknown>): Array<[string, unknown]> {
  return Object.keys(o)
    .sort()
    .map((k) => [k, o[k]]);
}
