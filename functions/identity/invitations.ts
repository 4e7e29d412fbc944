/**
 * Invitations: an `org:admin` invites an e-mail address with a role and receives
 * a one-time code (128 random bits, stored hashed, valid 7 days). Accepting:
 * - no bearer token and a new e-mail: creates the user, the membership and a token;
 * - the e-mail belongs to a user: that user's bearer token is required (401
 *   without one, 403 with another user's) and only the membership is added.
 * The code is consumed by a single conditional UPDATE, so it works once.
 * An `org:admin` lists the open invitations (never their codes: only hashes are
 * stored) and revokes one, so a code sent to the wrong address or leaked need
 * not live out its 7 days.
 */
import { z } from "@hono/zod-openapi";
import { hashToken } from "../../shared/auth/tokens";
import { randomBytes, toBase64Url } from "../../shared/crypto/encoding";
import { ApiError, notFound } from "../../shared/http/errors";
import { pathId } from "../../shared/http/params";
import { PageQuery, pageOf, toPage } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { acceptInvitation, createInvitation, listPendingInvitations, type PendingInvitation, revokeInvitation } from "./invitations-store";
import { withAudit } from "../operations/audit/record";
import { Name, OrgIdParam, RoleSchema, UserSchema } from "./schema";

const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;
const Email = z.email().max(320);

const create = defineRoute({
  method: "post",
  path: "/orgs/{orgId}/invitations",
  tags: ["Identity"],
  summary: "Invite an e-mail address to the organization",
  description: "Returns the invitation code once. Only an owner may invite another owner.",
  permission: "org:admin",
  idempotent: true,
  request: { params: OrgIdParam, body: jsonRequest(z.strictObject({ email: Email, role: RoleSchema })) },
  responses: {
    201: jsonResponse(
      z.object({ id: z.string(), email: z.string(), role: RoleSchema, code: z.string(), expiresAt: z.string() }).openapi("Invitation"),
      "The invitation and its one-time code",
    ),
  },
});

export const PendingInvitationSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    role: RoleSchema,
    invitedBy: z
      .object({ userId: z.string(), email: z.string() })
      .nullable()
      .openapi({ description: "null when the inviting user's account was deleted since" }),
    createdAt: z.string(),
    expiresAt: z.string(),
  })
  .openapi("PendingInvitation");

const list = defineRoute({
  method: "get",
  path: "/orgs/{orgId}/invitations",
  tags: ["Identity"],
  summary: "List the organization's open invitations",
  description:
    "Requires `org:admin`, the permission to invite. Invitations neither accepted nor expired, oldest first. The code is never part of it: only its hash is stored.",
  permission: "org:admin",
  request: { params: OrgIdParam, query: PageQuery },
  responses: { 200: jsonResponse(pageOf(PendingInvitationSchema, "PendingInvitationPage"), "Open invitations, oldest first") },
});

const revoke = defineRoute({
  method: "delete",
  path: "/orgs/{orgId}/invitations/{id}",
  tags: ["Identity"],
  summary: "Revoke an invitation",
  description:
    "Requires `org:admin`. Its code is refused (404) from then on. An invitation already accepted, already revoked or of another organization answers 404 like an unknown id. An admin may revoke an invitation to the owner role: revoking grants nothing, and a leaked owner code is what most needs stopping.",
  permission: "org:admin",
  request: { params: OrgIdParam.extend({ id: pathId("id") }) },
  responses: { 204: { description: "Revoked" } },
});

const pendingView = (i: PendingInvitation) => ({ ...i, createdAt: i.createdAt.toISOString(), expiresAt: i.expiresAt.toISOString() });

const accept = defineRoute({
  method: "post",
  path: "/invitations/accept",
  tags: ["Identity"],
  summary: "Accept an invitation",
  description:
    "Without a bearer token, creates the invited user (`name` required) and returns their first token. If the e-mail already belongs to a user, that user's bearer token is required and only the membership is added (`token` is null).",
  permission: "public",
  request: { body: jsonRequest(z.strictObject({ code: z.string().min(1).max(200), name: Name.optional() })) },
  responses: {
    200: jsonResponse(z.object({ user: UserSchema, organizationId: z.string(), token: z.string().nullable() }).openapi("AcceptedInvitation"), "Joined"),
    409: {
      description:
        "Already a member of the organization; or an account with the invited e-mail was created at the same moment (another invitation accepted concurrently): the invitation stays open, accept it again with that user's bearer token",
    },
  },
});

export const invitationsRouter = createRouter()
  .openapi(create, async (c) => {
    const { orgId } = c.req.valid("param");
    const { email, role } = c.req.valid("json");
    const caller = callerOf(c);
    if (role === "owner" && caller.role !== "owner") throw new ApiError("forbidden", "Only an owner can invite an owner");
    const code = `wsi_${toBase64Url(randomBytes(16))}`;
    const expiresAt = new Date(c.get("clock")().getTime() + INVITATION_TTL_MS);
    const codeHash = hashToken(code);
    // The code is a credential: the audit row names the invitee and role only.
    const id = await withAudit(
      c,
      (tx) => createInvitation(tx, { orgId, email, role, codeHash, invitedBy: caller.userId, expiresAt }),
      (id) => ({ orgId, action: "member.invited", target: { kind: "invitation", id }, details: { email, role } }),
    );
    return c.json({ id, email, role, code, expiresAt: expiresAt.toISOString() }, 201);
  })
  .openapi(list, async (c) => {
    const { orgId } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const rows = await listPendingInvitations(c.get("db"), orgId, c.get("clock")(), limit, cursor);
    const page = toPage(rows, limit, (i) => i.id);
    return c.json({ items: page.items.map(pendingView), nextCursor: page.nextCursor }, 200);
  })
  .openapi(revoke, async (c) => {
    const { orgId, id } = c.req.valid("param");
    // Like member.invited, the row names the invitee and role, never the code.
    const revoked = await withAudit(
      c,
      (tx) => revokeInvitation(tx, orgId, id),
      (row) => (row ? { orgId, action: "invitation.revoked", target: { kind: "invitation", id }, details: { email: row.email, role: row.role } } : null),
    );
    if (!revoked) throw notFound("Invitation");
    return c.body(null, 204);
  })
  .openapi(accept, async (c) => {
    const { code, name } = c.req.valid("json");
    const result = await acceptInvitation(c.get("db"), {
      codeHash: hashToken(code),
      now: c.get("clock")(),
      callerId: c.get("caller")?.userId ?? null,
      name,
    });
    const { id, email, name: userName } = result.user;
    return c.json({ user: { id, email, name: userName }, organizationId: result.organizationId, token: result.token }, 200);
  });
