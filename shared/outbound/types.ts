/**
 * Outbound delivery to destinations users configure (webhooks, chat hooks) and
 * e-mail. Injected through the request services and into the delivery engine,
 * so each runtime brings its own transport and tests point it at receivers.
 *
 * Results never carry the remote response body: errors are our own short
 * strings, safe to store, log and show to the channel's owner.
 */

export interface OutboundRequest {
  url: string;
  method?: "POST";
  headers: Record<string, string>;
  body: string;
}

export type OutboundResult =
  | { ok: true; status: number }
  | {
      ok: false;
      /** Why it failed, in our own words (no remote body, no URL). */
      error: string;
      /** Network errors, timeouts, 408, 429 and 5xx are worth retrying. */
      retryable: boolean;
      status?: number;
      /** Seconds the destination asked us to wait (Retry-After), when it said. */
      retryAfterSeconds?: number;
    };

export interface Outbound {
  send(request: OutboundRequest): Promise<OutboundResult>;
}

export interface EmailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  send(message: EmailMessage): Promise<OutboundResult>;
}

export const DEFAULT_TIMEOUT_MS = 10_000;

/** HTTP statuses worth retrying. */
export function retryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** Retry-After as seconds (delta-seconds or an HTTP date), or undefined. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

/** The outcome of an HTTP answer: 2xx is success, 3xx is refused (redirects are never followed). */
export function resultOfStatus(status: number, retryAfter: string | null | undefined): OutboundResult {
  if (status >= 200 && status < 300) return { ok: true, status };
  if (status >= 300 && status < 400) {
    return { ok: false, status, retryable: false, error: `The destination answered with a redirect (HTTP ${status}); redirects are not followed` };
  }
  const retryable = retryableStatus(status);
  const retryAfterSeconds = retryable ? parseRetryAfter(retryAfter) : undefined;
  return {
    ok: false,
    status,
    retryable,
    error: `The destination answered HTTP ${status}`,
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
  };
}
