/**
 * The cloud link of the active organization (self-hosted only): read, set,
 * remove. Linked, the home feed merges the cloud organization's projects, and
 * per-project routes of cloud projects are forwarded there.
 */
import { z } from "@hono/zod-openapi";
import { ApiError, notFound } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { noControl } from "../projects/schema";
import { deleteLink, findLink, type LinkRow } from "./link-store";
import { linkOrganization } from "./link-service";

const TAGS = ["Cloud link (self-hosted)"];

export const CloudLinkSchema = z
  .object({
    linked: z.boolean(),
    apiUrl: z.string().nullable(),
    cloudOrganization: z.object({ id: z.string(), name: z.string() }).nullable(),
    tokenHint: z
      .string()
      .nullable()
      .openapi({ description: "`…` and the token's last four characters; the token itself is encrypted at rest and never returned" }),
    setBy: z.enum(["api", "environment"]).nullable().openapi({ description: "`environment`: CLOUD_API_URL/CLOUD_TOKEN set it at start (change it there)" }),
    updatedAt: z.string().nullable(),
  })
  .openapi("CloudLink");

/** The token and the secrets a transfer carries travel to this URL: only loopback may be plain HTTP. */
function httpsUnlessLoopback(raw: string): boolean {
  if (!URL.canParse(raw)) return true; // left to the URL check's own message
  const url = new URL(raw);
  return url.protocol === "https:" || ["127.0.0.1", "[::1]", "localhost"].includes(url.hostname);
}

const LinkBody = z
  .strictObject({
    apiUrl: z
      .string()
      .url()
      .max(2048)
      .regex(/^https?:\/\//, "must be an http(s) URL")
      .refine(httpsUnlessLoopback, "must be https (plain http only to this machine: 127.0.0.1, ::1 or localhost)")
      .optional()
      .openapi({ description: "The cloud API's base URL (without `/api`); default: CLOUD_API_URL" }),
    token: z
      .string()
      .min(16)
      .max(512)
      .regex(/^[\x21-\x7e]+$/, "must be a personal access token")
      .openapi({ description: "A personal access token of the cloud (`wsp_…`); checked against the cloud, then stored encrypted" }),
    organizationId: z
      .string()
      .min(1)
      .max(100)
      .regex(noControl)
      .optional()
      .openapi({ description: "The cloud organization; default: the token user's default there" }),
  })
  .openapi("CloudLinkRequest");

const view = (row: LinkRow | undefined) => ({
  linked: Boolean(row),
  apiUrl: row?.apiUrl ?? null,
  cloudOrganization: row ? { id: row.cloudOrgId, name: row.cloudOrgName } : null,
  tokenHint: row ? `…${row.tokenHint}` : null,
  setBy: row ? (row.fromEnvironment ? ("environment" as const) : ("api" as const)) : null,
  updatedAt: row?.updatedAt.toISOString() ?? null,
});

const get = defineRoute({
  method: "get",
  path: "/cloud/link",
  tags: TAGS,
  summary: "This organization's link to a cloud organization",
  description: "Self-hosted only (404 on the cloud).",
  permission: "project:list",
  responses: { 200: jsonResponse(CloudLinkSchema, "The link (`linked: false` when there is none)") },
});

const put = defineRoute({
  method: "put",
  path: "/cloud/link",
  tags: TAGS,
  summary: "Link this organization to a cloud organization",
  description:
    "The token is checked against the cloud (`GET /api/me` there) before anything is stored: an unreachable URL, or plain `http:` to another machine than this one, is 400 naming `apiUrl` (the URL is reached through the outbound guard: private and loopback addresses only with OUTBOUND_ALLOW_PRIVATE, link-local and metadata addresses never), a refused token 400 naming `token`, an organization the token's user is not in 400 naming `organizationId`. Stored encrypted with the instance's keyring; never returned. Replaces an earlier link made through the API; a link set by CLOUD_TOKEN is 409 (change the environment). Self-hosted only.",
  permission: "org:admin",
  request: { body: jsonRequest(LinkBody) },
  responses: { 200: jsonResponse(CloudLinkSchema, "The link"), 409: { description: "The link is set by CLOUD_TOKEN" } },
});

const remove = defineRoute({
  method: "delete",
  path: "/cloud/link",
  tags: TAGS,
  summary: "Unlink this organization from the cloud",
  description:
    "The token is deleted. Cloud projects then drop out of the home feed and their per-project routes answer 409 until the organization is linked again. 409 for a link set by CLOUD_TOKEN. Self-hosted only.",
  permission: "org:admin",
  responses: { 204: { description: "Unlinked" }, 409: { description: "The link is set by CLOUD_TOKEN" } },
});

const envOwned = () => new ApiError("conflict", "This organization's cloud link is set by CLOUD_API_URL/CLOUD_TOKEN; change or unset them and restart");

export const cloudLinkRouter = createRouter()
  .openapi(get, async (c) => c.json(view(await findLink(c.get("db"), callerOf(c).orgId)), 200))
  .openapi(put, async (c) => {
    const { orgId, userId } = callerOf(c);
    const body = c.req.valid("json");
    const apiUrl = body.apiUrl ?? c.get("config").cloudApiUrl;
    if (!apiUrl) throw new ApiError("validation", "Name the cloud API with apiUrl (CLOUD_API_URL is not set)", { field: "apiUrl" });
    if ((await findLink(c.get("db"), orgId))?.fromEnvironment) throw envOwned();
    const row = await linkOrganization(
      c.get("db"),
      c.get("keyring"),
      orgId,
      { apiUrl, token: body.token, organizationId: body.organizationId, linkedBy: userId, fromEnvironment: false },
      c.get("clock")(),
    );
    return c.json(view(row), 200);
  })
  .openapi(remove, async (c) => {
    const { orgId } = callerOf(c);
    const link = await findLink(c.get("db"), orgId);
    if (!link) throw notFound("Cloud link");
    if (link.fromEnvironment) throw envOwned();
    await deleteLink(c.get("db"), orgId);
    return c.body(null, 204);
  });
