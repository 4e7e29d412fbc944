/** Helpers the Notifications suites share: provider URLs, a signing secret, and calls under /api/notifications. */
import { expect } from "vitest";
import { ChannelSchema, CreatedChannelSchema, EventResultSchema, SubscriptionSchema } from "../../functions/notifications/schema";
import { pageOf } from "../../shared/http/pagination";
import { expectBody, expectProblem, type Harness, type Member } from "./harness";

/** The list routes' pages, built as the routes build them. */
export const ChannelPage = pageOf(ChannelSchema, "NotificationChannelPage");
export const SubscriptionPage = pageOf(SubscriptionSchema, "NotificationSubscriptionPage");

export const SLACK = "https://hooks.slack.com/services/T0AAAA111/B0BBBB222/abcdefSECRET123";
export const DISCORD = "https://discord.com/api/webhooks/123456789012345678/discordTOKENsecret";
export const TEAMS_WORKFLOW =
  "https://prod-12.westus.logic.azure.com:443/workflows/0123abcd/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=teamsSIG";
export const TEAMS_CONNECTOR = "https://contoso.webhook.office.com/webhookb2/aaaa-bbbb@cccc/IncomingWebhook/dddd/eeee";

/** A `whsec_` secret of 32 bytes. */
export const SECRET = `whsec_${btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => i + 1)))}`;

export type Json = Record<string, any>;

export function notificationsHelpers(h: Harness) {
  const N = "/api/notifications";
  const get = (token: string, path: string, org?: string) => h.request(`${N}${path}`, { token, org });
  const send = (method: string, token: string, path: string, json?: unknown, org?: string) => h.request(`${N}${path}`, { method, token, json, org });
  const createChannel = async (t: Member, body: Json, org?: string): Promise<Json> =>
    expectBody(await send("POST", t.token, "/channels", body, org), 201, CreatedChannelSchema);
  const channels = async (t: Member, org?: string): Promise<Json[]> =>
    (await expectBody(await get(t.token, "/channels?limit=100", org), 200, ChannelPage)).items;
  const subscriptions = async (t: Member, org?: string): Promise<Json[]> =>
    (await expectBody(await get(t.token, "/subscriptions?limit=100", org), 200, SubscriptionPage)).items;
  const emit = async (t: Member, body: Json, org?: string): Promise<Json> =>
    expectBody(await send("POST", t.token, "/events", body, org), 202, EventResultSchema);
  const inApp = async (t: Member, org?: string) => (await channels(t, org)).find((c) => c.kind === "in_app")!;
  /** A 404 body without its request id, to compare "not yours" with "never existed". */
  const notFoundBody = async (res: Response) => {
    const { requestId, ...rest } = await expectProblem(res, 404);
    expect(requestId).toMatch(/^req_/);
    return rest;
  };
  return { get, send, createChannel, channels, subscriptions, emit, inApp, notFoundBody };
}
