/**
 * E-mail through an HTTP e-mail API: what the Worker uses (a Worker cannot use
 * nodemailer). The request is Resend's `POST /emails` format
 * (`{from, to: [..], subject, text, html}` with `Authorization: Bearer <key>`);
 * EMAIL_API_URL points it at Resend (the default) or a compatible relay.
 * Operator-configured, so not subject to the private-address guard.
 */
import { DEFAULT_TIMEOUT_MS, resultOfStatus, type Mailer, type OutboundResult } from "./types";

export const DEFAULT_EMAIL_API_URL = "https://api.resend.com/emails";

export interface EmailApiOptions {
  apiKey: string;
  from: string;
  url?: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export function createEmailApiMailer(options: EmailApiOptions): Mailer {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  return {
    async send(message): Promise<OutboundResult> {
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await doFetch(options.url ?? DEFAULT_EMAIL_API_URL, {
          method: "POST",
          headers: { authorization: `Bearer ${options.apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({ from: options.from, to: [message.to], subject: message.subject, text: message.text, html: message.html }),
          redirect: "manual",
          signal,
        });
        await res.body?.cancel().catch(() => {});
        const result = resultOfStatus(res.status, res.headers.get("retry-after"));
        return result.ok ? result : { ...result, error: result.error.replace("The destination", "The e-mail API") };
      } catch {
        if (signal.aborted) return { ok: false, retryable: true, error: "The e-mail API did not answer in time" };
        return { ok: false, retryable: true, error: "Could not reach the e-mail API" };
      }
    },
  };
}
