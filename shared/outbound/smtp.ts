/**
 * E-mail over SMTP (the Node adapter, `SMTP_URL`, e.g. `smtp://user:pass@host:587`
 * or `smtps://…:465`), through nodemailer. The server's reply text is never
 * echoed: failures carry the SMTP code only.
 */
import nodemailer from "nodemailer";
import { DEFAULT_TIMEOUT_MS, type Mailer, type OutboundResult } from "./types";

export interface SmtpMailerOptions {
  url: string;
  from: string;
  timeoutMs?: number;
}

export function createSmtpMailer(options: SmtpMailerOptions): Mailer & { close(): void } {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const transport = nodemailer.createTransport({
    url: options.url,
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
  } as never);
  return {
    async send(message): Promise<OutboundResult> {
      try {
        await transport.sendMail({ from: options.from, to: message.to, subject: message.subject, text: message.text, html: message.html });
        return { ok: true, status: 250 };
      } catch (e) {
        const err = e as { responseCode?: number; code?: string };
        if (typeof err.responseCode === "number") {
          // 4xx: transient (greylisting, mailbox busy); 5xx: permanent.
          return {
            ok: false,
            status: err.responseCode,
            retryable: err.responseCode < 500,
            error: `The mail server refused the message (SMTP ${err.responseCode})`,
          };
        }
        return { ok: false, retryable: true, error: `Could not reach the mail server${err.code ? ` (${err.code})` : ""}` };
      }
    },
    close: () => transport.close(),
  };
}
