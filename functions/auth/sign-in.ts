/** Opening a session once the user is known (by code or by token): the row, the cookie, the answer. */
import { earliestExpiry } from "../../shared/auth/token-lifetime";
import { newSessionSecret, SESSION_ABSOLUTE_MS, setSessionCookie } from "../../shared/auth/session";
import { openSession, pruneSessions } from "../../shared/auth/session-store";
import type { AppContext } from "../../shared/http/context";
import { findUser } from "../identity/store";
import { sessionView } from "./schema";

const MAX_USER_AGENT = 256;

/** The User-Agent as shown in the session list: printable characters only, capped. */
function userAgentOf(c: AppContext): string | null {
  const raw = c.req.header("user-agent");
  if (!raw) return null;
  const printable = raw.replace(/[^\x20-\x7e]/g, "").slice(0, MAX_USER_AGENT);
  return printable || null;
}

export async function signIn(c: AppContext, userId: string, via: { tokenId: string; tokenExpiresAt: Date | null } | null) {
  const db = c.get("db");
  const now = c.get("clock")();
  const secret = newSessionSecret();
  const expiresAt = earliestExpiry(new Date(now.getTime() + SESSION_ABSOLUTE_MS), via?.tokenExpiresAt ?? null)!;
  const row = await openSession(db, { userId, secret, tokenId: via?.tokenId ?? null, userAgent: userAgentOf(c), expiresAt, now });
  await pruneSessions(db, now);
  setSessionCookie(c, secret, expiresAt, now);
  c.header("cache-control", "no-store");
  const user = await findUser(db, userId);
  return { user: user!, session: sessionView(row, row.id) };
}
