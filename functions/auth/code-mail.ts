/** The sign-in code e-mail. */
import type { EmailMessage } from "../../shared/outbound/types";
import { CODE_TTL_MS } from "./limits";

export function codeMail(to: string, code: string): EmailMessage {
  const minutes = CODE_TTL_MS / 60_000;
  const text = `Your sign-in code is ${code}\n\nIt expires in ${minutes} minutes and works once. If you did not ask to sign in, ignore this message.\n`;
  const html = `<p>Your sign-in code is <strong style="font-size:1.4em;letter-spacing:0.15em">${code}</strong></p><p>It expires in ${minutes} minutes and works once. If you did not ask to sign in, ignore this message.</p>`;
  return { to, subject: `Sign-in code: ${code}`, text, html };
}
