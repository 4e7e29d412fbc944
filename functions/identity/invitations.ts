/**
 * Invitations: an `org:admin` invites an e-mail address with a role and receives
 * a one-time code (128 random bits, stored hashed, valid 7 days). Accepting:
 * - no bearer token and a new e-mail: creates the user, the membership and a token;
 * - the e-mail belongs to a user: that user's bearer token is required (401
 *   without one, 403 with another user's) and only the membership is added.
 * The code is consumed by a single conditional UPDATE, so it works once.
 */
import { z } from "@hono/zod-openapi";
import { hashToken } from "../../shared/auth/tokens";
import { randomBytes, toBase64Url } from "../../shared/crypto/encoding";
import { ApiError } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { acceptInvitation, createInvitation } from "./invitations-store";
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
    const codeHash = await hashToken(code);
    // The code is a credential: the audit row names the invitee and role only.
    const id = await withAudit(
      c,
      (tx) => createInvitation(tx, { orgId, email, role, codeHash, invitedBy: caller.userId, expiresAt }),
      (id) => ({ orgId, action: "member.invited", target: { kind: "invitation", id }, details: { email, role } }),
    );
    return c.json({ id, email, role, code, expiresAt: expiresAt.toISOString() }, 201);
  })
  .openapi(accept, async (c) => {
    const { code, name } = c.req.valid("json");
    const result = await acceptInvitation(c.get("db"), {
      codeHash: await hashToken(code),
      now: c.get("clock")(),
      callerId: c.get("caller")?.userId ?? null,
      name,
    });
    const { id, email, name: userName } = result.user;
    return c.json({ user: { id, email, name: userName }, organizationId: result.organizationId, token: result.token }, 200);
  });
