/** Wire shapes of the sign-in and session routes. */
import { z } from "@hono/zod-openapi";
import { SESSION_IDLE_MS } from "../../shared/auth/session";
import type { SessionRow } from "../../shared/auth/session-store";
import { UserSchema } from "../identity/schema";

export const SessionSchema = z
  .object({
    id: z.string(),
    createdAt: z.string(),
    lastSeenAt: z.string().openapi({ description: "Last use, recorded at most once a minute" }),
    idleExpiresAt: z.string().openapi({ description: "When the session ends unless used before: 12 hours after its last use" }),
    expiresAt: z.string().openapi({
      description: "When the session ends however much it is used: 7 days after sign-in (earlier for a session opened with a token that expires sooner)",
    }),
    userAgent: z.string().nullable(),
    signedInWith: z.enum(["code", "token"]).openapi({ description: "An e-mailed code, or a pasted personal access token (the session ends with that token)" }),
    current: z.boolean().openapi({ description: "The session this request was made with" }),
  })
  .openapi("Session");

export const SignedInSchema = z.object({ user: UserSchema, session: SessionSchema }).openapi("SignedIn");

/** The 200 of a sign-in: the body and the cookie. */
export const signedInResponse = {
  description: "Signed in; the session cookie is set",
  content: { "application/json": { schema: SignedInSchema } },
  headers: {
    "Set-Cookie": {
      description:
        "`__Host-wsp_session=<opaque id>; Max-Age=…; Path=/; HttpOnly; Secure; SameSite=Lax` (`wsp_session` without `Secure` when the origin is plain-HTTP 127.0.0.1, localhost or [::1]: PUBLIC_URL's when set, else the request's)",
      schema: { type: "string" as const },
    },
  },
} as const;

export function sessionView(row: SessionRow, currentId: string | undefined): z.infer<typeof SessionSchema> {
  const idle = new Date(row.lastSeenAt.getTime() + SESSION_IDLE_MS);
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    lastSeenAt: row.lastSeenAt.toISOString(),
    idleExpiresAt: (idle < row.expiresAt ? idle : row.expiresAt).toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    userAgent: row.userAgent,
    signedInWith: row.tokenId ? "token" : "code",
    current: row.id === currentId,
  };
}
