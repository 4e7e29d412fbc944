/**
 * POST /api/auth/login {email}: e-mails a one-time sign-in code. The answer is
 * the same whether or not the address has an account: a code row is kept either
 * way (tries are counted the same at verify) and the mail goes out after the
 * answer, so neither the body nor the time taken tells. Without a mailer the
 * route answers 503 for every address.
 */
import { z } from "@hono/zod-openapi";
import { randomBytes, sha256Hex, toBase64Url } from "../../shared/crypto/encoding";
import { tooManyRequests } from "../../shared/http/errors";
import type { AppContext } from "../../shared/http/context";
import { problem, rateLimitedResponse } from "../../shared/http/problem-schema";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { takeApiLimits } from "../notifications/rate-limit";
import { clientKey } from "./client-address";
import { codeMail } from "./code-mail";
import { CODE_DIGITS, CODE_MAX_ATTEMPTS, CODE_TTL_MS, LOGIN_LIMIT_TEXT, loginTakes } from "./limits";
import { pruneCodes, putCode, userIdByEmail } from "./store";

export const EmailSchema = z
  .email()
  .max(320)
  .transform((e) => e.toLowerCase());

const CodeSentSchema = z
  .object({
    detail: z.string(),
    expiresInSeconds: z.number().int(),
    maxAttempts: z.number().int(),
  })
  .openapi("SignInCodeSent");

const route = defineRoute({
  method: "post",
  path: "/auth/login",
  tags: ["Sessions"],
  summary: "E-mail a one-time sign-in code",
  description: `Sends a ${CODE_DIGITS}-digit code to the address if it has an account; the answer is the same either way. The code expires in ${CODE_TTL_MS / 60_000} minutes and allows ${CODE_MAX_ATTEMPTS} tries; asking again replaces it. Limited to ${LOGIN_LIMIT_TEXT} (429 with \`Retry-After\`). 503 when this server has no e-mail configured (self-hosted: sign in with a token, POST /api/auth/token).`,
  permission: "public",
  request: { body: jsonRequest(z.strictObject({ email: EmailSchema })) },
  responses: {
    202: jsonResponse(CodeSentSchema, "Accepted; a code is on its way if the address has an account"),
    429: rateLimitedResponse(`Limited to ${LOGIN_LIMIT_TEXT}`, "Seconds until a code may be asked for again"),
    503: problem("E-mail is not configured on this server"),
  },
});

/** A uniformly drawn code of CODE_DIGITS digits (rejection sampling: no modulo bias). */
function newCode(): string {
  const range = 10 ** CODE_DIGITS;
  const limit = Math.floor(2 ** 32 / range) * range;
  for (;;) {
    const n = new DataView(randomBytes(4).buffer).getUint32(0);
    if (n < limit) return String(n % range).padStart(CODE_DIGITS, "0");
  }
}

export const hashCode = (salt: string, code: string) => sha256Hex(`${salt}:${code}`);

/** 503 as problem+json: ApiError has no code for it, and an unconfigured mailer is the server's state, not the request's fault. */
function emailNotConfigured(c: AppContext): Response {
  const body = {
    type: "urn:workspace:problem:email-not-configured",
    title: "Service Unavailable",
    status: 503,
    detail:
      c.get("config").mode === "self-hosted"
        ? "E-mail is not configured on this server (SMTP_URL or EMAIL_API_KEY), so no sign-in code can be sent; sign in with a personal access token (POST /api/auth/token)"
        : "E-mail is not configured on this server, so no sign-in code can be sent",
    requestId: c.get("requestId"),
  };
  return c.body(JSON.stringify(body), 503, { "content-type": "application/problem+json" });
}

/** Runs after the answer: waitUntil on the Worker; on Node the process lives on anyway. */
function afterResponse(c: AppContext, work: Promise<unknown>): void {
  let ctx: { waitUntil(p: Promise<unknown>): void } | undefined;
  try {
    ctx = c.executionCtx;
  } catch {
    ctx = undefined;
  }
  ctx?.waitUntil(work);
}

/** Takes one unit of each limit, both or neither; the seconds to wait when refused. */
async function takeLogin(c: AppContext, email: string, now: Date): Promise<number | null> {
  return (await takeApiLimits(c, loginTakes(email, clientKey(c)), now))?.retryAfter ?? null;
}

export const loginRouter = createRouter().openapi(route, async (c) => {
  const { email } = c.req.valid("json");
  const mailer = c.get("services").mailer;
  // A hand-built problem (see emailNotConfigured), outside the typed responses.
  if (!mailer) return emailNotConfigured(c) as never;
  const db = c.get("db");
  const now = c.get("clock")();
  const wait = await takeLogin(c, email, now);
  if (wait !== null) throw tooManyRequests(`Too many sign-in codes asked for: the limit is ${LOGIN_LIMIT_TEXT}. Try again in ${wait} s.`, wait);
  const userId = (await userIdByEmail(db, email)) ?? null;
  const code = newCode();
  const salt = toBase64Url(randomBytes(16));
  await putCode(db, { email, userId, codeHash: hashCode(salt, code), salt, expiresAt: new Date(now.getTime() + CODE_TTL_MS), now });
  await pruneCodes(db, now);
  if (userId) {
    const logger = c.get("logger");
    const requestId = c.get("requestId");
    // Never the code, never the address in the log.
    const sending = mailer
      .send(codeMail(email, code))
      .then((result) => {
        if (!result.ok) logger.error("sign-in code mail failed", { requestId, error: result.error });
      })
      .catch((e: unknown) => logger.error("sign-in code mail failed", { requestId, error: e instanceof Error ? e.name : "error" }));
    afterResponse(c, sending);
  }
  return c.json(
    {
      detail: `If an account uses this address, a sign-in code was sent to it. It expires in ${CODE_TTL_MS / 60_000} minutes.`,
      expiresInSeconds: CODE_TTL_MS / 1000,
      maxAttempts: CODE_MAX_ATTEMPTS,
    },
    202,
  );
});
