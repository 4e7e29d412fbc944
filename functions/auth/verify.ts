/**
 * POST /api/auth/verify {email, code}: trades the e-mailed code for a session
 * cookie. Every failure (wrong code, expired, tries used up, an address without
 * an account, no code asked for) is the same 400 naming `code`. Each try counts,
 * right or wrong; after 5 the code is burned.
 */
import { z } from "@hono/zod-openapi";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { CODE_DIGITS, CODE_MAX_ATTEMPTS } from "./limits";
import { EmailSchema, hashCode } from "./login";
import { signedInResponse } from "./schema";
import { signIn } from "./sign-in";
import { consumeCode, takeTry } from "./store";

const route = defineRoute({
  method: "post",
  path: "/auth/verify",
  tags: ["Sessions"],
  summary: "Sign in with the e-mailed code: sets the session cookie",
  description: `Answers 200 with the user and the new session, and \`Set-Cookie\`: an opaque session id, \`HttpOnly; SameSite=Lax; Path=/\`, named \`__Host-wsp_session\` with \`Secure\` (plain \`wsp_session\` without \`Secure\` only when the request came to \`http://\` 127.0.0.1, localhost or [::1]). The session ends after 12 hours unused or 7 days after sign-in. A wrong, expired or used-up code, and an address without an account, are the same 400 naming \`code\`; the ${CODE_MAX_ATTEMPTS}th try burns the code. Spaces and dashes in the code are ignored.`,
  permission: "public",
  request: {
    body: jsonRequest(
      z.strictObject({
        email: EmailSchema,
        code: z
          .string()
          .max(32)
          .openapi({ description: `The ${CODE_DIGITS} digits from the e-mail` }),
      }),
    ),
  },
  responses: { 200: signedInResponse },
});

const wrongCode = () =>
  badRequest("code", `The code is wrong or has expired (a code allows ${CODE_MAX_ATTEMPTS} tries and lives 10 minutes); ask for a new one if needed`);

export const verifyRouter = createRouter().openapi(route, async (c) => {
  const body = c.req.valid("json");
  const code = body.code.replace(/[\s-]/g, "");
  if (!new RegExp(`^[0-9]{${CODE_DIGITS}}$`).test(code)) throw badRequest("code", `The code is ${CODE_DIGITS} digits`);
  const db = c.get("db");
  const now = c.get("clock")();
  const live = await takeTry(db, body.email, CODE_MAX_ATTEMPTS, now);
  if (!live) throw wrongCode();
  const hash = await hashCode(live.salt, code);
  if (hash !== live.codeHash || !live.userId) throw wrongCode();
  if (!(await consumeCode(db, body.email, hash))) throw wrongCode();
  return c.json(await signIn(c, live.userId, null), 200);
});
