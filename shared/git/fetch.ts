/**
 * The transport the git client reads through: a fetch-like function that
 * returns the response (the notification Outbound discards bodies, git needs
 * them). This one applies the outbound guard's URL check (literal private,
 * loopback, link-local and metadata addresses and `localhost` refused unless
 * OUTBOUND_ALLOW_PRIVATE; link-local and metadata always) and never follows a
 * redirect. It is the Worker's (Cloudflare does not route to private
 * addresses, so names need no resolving); the Node adapter uses node-fetch.ts,
 * which also checks every address a name resolves to.
 */
import { checkUrl } from "../outbound/fetch";

export interface GitFetchInit {
  method: string;
  headers: Record<string, string>;
  body?: Uint8Array<ArrayBuffer>;
  signal: AbortSignal;
}

/** Resolves with the response as it came (redirects not followed); rejects on network errors and refusals. */
export type GitFetch = (url: string, init: GitFetchInit) => Promise<Response>;

/** The outbound guard refused the destination; the message says why and names the setting when one applies. */
export class GitFetchRefused extends Error {
  override readonly name = "GitFetchRefused";
}

export interface GuardedGitFetchOptions {
  allowPrivate?: boolean;
  fetch?: typeof fetch;
}

export function createGuardedGitFetch(options: GuardedGitFetchOptions = {}): GitFetch {
  const allowPrivate = options.allowPrivate ?? false;
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  return async (raw, init) => {
    const url = checkUrl(raw, allowPrivate);
    if (!(url instanceof URL)) throw new GitFetchRefused(url.ok ? "refused" : url.error);
    return doFetch(url.toString(), { method: init.method, headers: init.headers, body: init.body, signal: init.signal, redirect: "manual" });
  };
}
