/**
 * GET /api/auth/methods: how one can sign in on this server, for the console's
 * sign-in page: an e-mailed code only where a mailer is configured, a pasted
 * token only on self-hosted instances. Asked instead of trying each route and
 * reading its refusal, so a page load sends no request known to fail.
 */
import { z } from "@hono/zod-openapi";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";

const SignInMethodsSchema = z
  .object({
    email: z
      .boolean()
      .openapi({ description: "An e-mailed one-time code works here (POST /api/auth/login): the server has a mailer (SMTP_URL or EMAIL_API_KEY)" }),
    token: z.boolean().openapi({ description: "Signing in by pasting a personal access token works here (POST /api/auth/token): self-hosted instances only" }),
  })
  .openapi("SignInMethods");

const route = defineRoute({
  method: "get",
  path: "/auth/methods",
  tags: ["Sessions"],
  summary: "How to sign in on this server",
  description:
    "Public. Whether an e-mailed code (`email`: a mailer is configured) and a pasted personal access token (`token`: self-hosted) can sign in here. The console shows only the forms that work.",
  permission: "public",
  responses: { 200: jsonResponse(SignInMethodsSchema, "The sign-in methods this server offers") },
});

export const methodsRouter = createRouter().openapi(route, (c) => {
  c.header("cache-control", "no-store");
  return c.json({ email: c.get("services").mailer !== undefined, token: c.get("config").mode === "self-hosted" }, 200);
});
