/**
 * Outbound HTTP through `fetch`: the Worker's transport (and usable anywhere).
 * Never follows redirects, times out, discards the response body. It refuses
 * URLs whose host is a literal private/loopback/link-local/metadata address or
 * `localhost`; host names are not resolved here (a Worker cannot), which is
 * fine on Cloudflare, whose network does not route to private addresses.
 */
import { refusalForHost, refusalMessage, type Refusal } from "./address-guard";
import { DEFAULT_TIMEOUT_MS, resultOfStatus, type Outbound, type OutboundRequest, type OutboundResult } from "./types";

export interface FetchOutboundOptions {
  /** Allow loopback and private destinations (OUTBOUND_ALLOW_PRIVATE); link-local and metadata addresses stay refused. */
  allowPrivate?: boolean;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export const refused = (refusal: Refusal): OutboundResult => ({ ok: false, retryable: false, error: refusalMessage(refusal) });

/** Parses and checks the URL itself; returns the URL or the failure. */
export function checkUrl(raw: string, allowPrivate: boolean): URL | OutboundResult {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, retryable: false, error: "The destination URL is not valid" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return { ok: false, retryable: false, error: "Only http and https destinations are allowed" };
  const refusal = refusalForHost(url.hostname, allowPrivate);
  return refusal ? refused(refusal) : url;
}

export function timeoutResult(timeoutMs: number): OutboundResult {
  const limit = timeoutMs < 1000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`;
  return { ok: false, retryable: true, error: `The destination did not answer within ${limit}` };
}

export function createFetchOutbound(options: FetchOutboundOptions = {}): Outbound {
  const allowPrivate = options.allowPrivate ?? false;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  return {
    async send(request: OutboundRequest): Promise<OutboundResult> {
      const url = checkUrl(request.url, allowPrivate);
      if (!(url instanceof URL)) return url;
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await doFetch(url.toString(), {
          method: request.method ?? "POST",
          headers: request.headers,
          body: request.body,
          redirect: "manual",
          signal,
        });
        // The body is never read, stored or echoed.
        await res.body?.cancel().catch(() => {});
        // An opaque redirect (status 0) is a redirect too.
        return resultOfStatus(res.status === 0 ? 302 : res.status, res.headers.get("retry-after"));
      } catch {
        if (signal.aborted) return timeoutResult(timeoutMs);
        return { ok: false, retryable: true, error: "Could not connect to the destination" };
      }
    },
  };
}
