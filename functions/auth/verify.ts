/**
 * POST /api/auth/verify {email, code}: trades the e-mailed code for a session
 * cookie. Every failure (wrong code, expired, tries used up, an address without
 * an account, no code asked for) is the same 400 naming `code`. Each try counts,
 * right or wrong; after 5 the code is burned. Failures also count per address
 * over 24 hours (limits.ts): past 20, every try is 429 with Retry-After, the
 * right code included, until the window passes. A 429 rather than the same 400:
 * it tells the owner why a right code fails and when to try again, and it says
 * nothing of the account, as unknown addresses are counted alike.
 */
import { z } from "@hono/zod-openapi";
import { badRequest, tooManyRequests } from "../../shared/http/errors";
import { rateLimitedResponse } from "../../shared/http/problem-schema";
import { defineRoute, jsonRequest } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { retryAfterSeconds, returnRateLimits, setRateLimitHeaders, takeRateLimits } from "../notifications/rate-limit";
import { CODE_DIGITS, CODE_MAX_ATTEMPTS, VERIFY_FAILURE_TEXT, verifyFailureTake } from "./limits";
import { EmailSchema, hashCode } from "./login";
import { signedInResponse } from "./schema";
import { signIn } from "./sign-in";
import { consumeCode, takeTry } from "./store";

const route = defineRoute({
  method: "post",
  path: "/auth/verify",
  tags: ["Sessions"],
  summary: "Sign in with the e-mailed code: sets the session cookie",
  description: `Answers 200 with the user and the new session, and \`Set-Cookie\`: an opaque session id, \`HttpOnly; SameSite=Lax; Path=/\`, named \`__Host-wsp_session\` with \`Secure\` (plain \`wsp_session\` without \`Secure\` only when the origin is \`http://\` 127.0.0.1, localhost or [::1]: PUBLIC_URL's origin when set, else the one the request came to). The session ends after 12 hours unused or 7 days after sign-in. A wrong, expired or used-up code, and an address without an account, are the same 400 naming \`code\`; the ${CODE_MAX_ATTEMPTS}th try burns the code. Limited to ${VERIFY_FAILURE_TEXT} (every address alike, with an account or not): past it every try, a right code too, is 429 with \`Retry-After\` until 24 hours after the first failure counted. Spaces and dashes in the code are ignored.`,
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
  responses: {
    200: signedInResponse,
    429: rateLimitedResponse(`Limited to ${VERIFY_FAILURE_TEXT}`, "Seconds until a code may be tried again"),
  },
});

const wrongCode = () =>
  badRequest("code", `The code is wrong or has expired (a code allows ${CODE_MAX_ATTEMPTS} tries and lives 10 minutes); ask for a new one if needed`);

export const verifyRouter = createRouter().openapi(route, async (c) => {
  const body = c.req.valid("json");
  const code = body.code.replace(/[\s-]/g, "");
  if (!new RegExp(`^[0-9]{${CODE_DIGITS}}$`).test(code)) throw badRequest("code", `The code is ${CODE_DIGITS} digits`);
  const db = c.get("db");
  const now = c.get("clock")();
  // Each try takes a failure unit first (so racing guesses cannot exceed the cap) and a success gives it back.
  const take = verifyFailureTake(body.email);
  const failures = (await takeRateLimits(db, [take], now)).get(take.key)!;
  setRateLimitHeaders(c, [{ max: take.max, count: failures.count, windowEnd: failures.windowEnd }], now);
  if (failures.granted < 1) {
    const wait = retryAfterSeconds(failures.windowEnd, now);
    throw tooManyRequests(`Too many wrong codes for this address: the limit is ${VERIFY_FAILURE_TEXT}. Try again in ${wait} s.`, wait);
  }
  const live = await takeTry(db, body.email, CODE_MAX_ATTEMPTS, now);
  if (!live) throw wrongCode();
  const hash = hashCode(live.salt, code);
  if (hash !== live.codeHash || !live.userId) throw wrongCode();
  if (!(await consumeCode(db, body.email, hash))) throw wrongCode();
  await returnRateLimits(db, [{ key: take.key, n: 1, windowEnd: failures.windowEnd }]);
  setRateLimitHeaders(c, [{ max: take.max, count: failures.count - 1, windowEnd: failures.windowEnd }], now);
  return c.json(await signIn(c, live.userId, null), 200);
});
