// @ts-check
/** The Notifications API's shapes as the console uses them, and reading a whole paginated list. */
import { api } from "./api.js";

/**
 * @typedef {{id: string, label: string, description: string, defaultEnabled: boolean, available: boolean, reason: string | null}} Category
 * @typedef {"email" | "webhook" | "in_app" | "slack" | "discord" | "msteams"} ChannelKind
 * @typedef {{id: string, kind: ChannelKind, label: string, enabled: boolean, verified: boolean, createdAt: string,
 *   config: {address?: string, url?: string, signingSecretConfigured?: boolean, webhookUrlConfigured?: boolean, webhookUrlHint?: string, format?: string}}} Channel
 * @typedef {{id: string, category: string, channelId: string, enabled: boolean}} Subscription
 * @typedef {{category: string, defaultEnabled: boolean, overridden: boolean}} OrgDefault
 */

/** Every item of a list route, page by page (100 a page). @param {string} path @returns {Promise<any[]>} */
export async function allPages(path) {
  const items = [];
  /** @type {string | null} */
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "100" });
    if (cursor) query.set("cursor", cursor);
    const page = await api("GET", `${path}?${query}`);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

/** How each kind is named on screen. @type {Record<ChannelKind, string>} */
export const KIND_NAMES = {
  email: "E-mail",
  webhook: "Webhook",
  in_app: "In-app",
  slack: "Slack",
  discord: "Discord",
  msteams: "Microsoft Teams",
};
