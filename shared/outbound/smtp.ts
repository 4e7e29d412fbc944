/**
 * E-mail over SMTP (the Node adapter, `SMTP_URL`, e.g. `smtp://user:pass@host:587`
 * or `smtps://…:465`), through nodemailer. The server's reply text is never
 * echoed: failures carry the SMTP code only. nodemailer is loaded on the first
 * send, so a start with SMTP configured does not wait for it.
 */
import type { Transporter } from "nodemailer";
import { DEFAULT_TIMEOUT_MS, type Mailer, type OutboundResult } from "./types";

export interface SmtpMailerOptions {
  url: string;
  from: string;
  timeoutMs?: number;
}

export function createSmtpMailer(options: SmtpMailerOptions): Mailer & { close(): void } {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let transport: Transporter | undefined;
  let closed = false;
  const open = async () =>
    (transport ??= (await import("nodemailer")).default.createTransport({
      url: options.url,
      connectionTimeout: timeout,
      greetingTimeout: timeout,
      socketTimeout: timeout,
    } as never));
  return {
    async send(message): Promise<OutboundResult> {
      if (closed) return { ok: false, retryable: true, error: "The mailer is closed" };
      try {
        await (await open()).sendMail({ from: options.from, to: message.to, subject: message.subject, text: message.text, html: message.html });
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
    close: () => {
      closed = true;
      transport?.close();
    },
  };
}
