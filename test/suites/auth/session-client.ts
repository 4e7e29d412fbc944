/** What the session suites share: reading the cookie a sign-in set, and signing in by code through the captured mail. */
import { expect } from "vitest";
import { eventually, expectStatus, type Harness } from "../../support/harness";
import type { NotificationsEnv } from "../../support/notifications-env";

/** The harness's requests go to http://workspace.test: its own origin, for the same-origin check. */
export const OWN_ORIGIN = "http://workspace.test";

/** `name=value` of the session cookie a response set (for a Cookie header). */
export function sessionCookieOf(res: Response): string {
  const header = res.headers.get("set-cookie");
  if (!header) throw new Error("no Set-Cookie");
  return header.split(";")[0]!;
}

/** The code in the latest sign-in mail to `email`. */
export async function codeFor(env: NotificationsEnv, email: string, after = 0): Promise<string> {
  return eventually(async () => {
    const mails = env.emails().filter((m) => m.to.includes(email) && m.subject.startsWith("Sign-in code"));
    expect(mails.length).toBeGreaterThan(after);
    const code = /\b([0-9]{6})\b/.exec(mails[mails.length - 1]!.text)?.[1];
    if (!code) throw new Error("no code in the mail");
    return code;
  }, 10_000);
}

export function mailsTo(env: NotificationsEnv, email: string) {
  return env.emails().filter((m) => m.to.includes(email));
}

/** Signs in by code, end to end; returns the Cookie header value. */
export async function signInByCode(h: Harness, env: NotificationsEnv, email: string): Promise<string> {
  const before = mailsTo(env, email).length;
  await expectStatus(await h.request("/api/auth/login", { json: { email } }), 202);
  const code = await codeFor(env, email, before);
  const res = await h.request("/api/auth/verify", { json: { email, code } });
  await expectStatus(res, 200);
  return sessionCookieOf(res);
}

/** A request with the cookie (and, for state-changing methods, this app's Origin unless told otherwise). */
export function withCookie(cookie: string, init: { method?: string; json?: unknown; origin?: string | null; org?: string; token?: string } = {}) {
  const headers: Record<string, string> = { cookie };
  const origin = init.origin === undefined ? OWN_ORIGIN : init.origin;
  if (origin !== null) headers.origin = origin;
  return { method: init.method, json: init.json, org: init.org, token: init.token, headers };
}
