/**
 * How this instance reaches the cloud: through the outbound guard (every address a
 * name resolves to is checked when the connection opens; private and loopback
 * refused unless OUTBOUND_ALLOW_PRIVATE, link-local and metadata always), since an
 * organization admin chooses the link's URL and the cloud names the storage URLs a
 * transfer uploads to and downloads from. The operator's own CLOUD_API_URL is
 * trusted as configured. Redirects are never followed. One policy per process,
 * set by the Node adapter's services at start.
 */
import { createNodeGitFetch } from "../../shared/git/node-fetch";

export type CloudTransport = (url: string, init: RequestInit) => Promise<Response>;

let transport: CloudTransport = (url, init) => fetch(url, { ...init, redirect: "manual" });

export function cloudTransport(): CloudTransport {
  return transport;
}

/** The guarded transport; `trustedOrigin`: the operator's CLOUD_API_URL, reached as configured. */
export function useGuardedCloudTransport(options: { allowPrivate: boolean; trustedOrigin?: string }): void {
  const guarded = createNodeGitFetch({ allowPrivate: options.allowPrivate });
  transport = async (url, init) => {
    if (options.trustedOrigin && new URL(url).origin === options.trustedOrigin) return fetch(url, { ...init, redirect: "manual" });
    const body = init.body === undefined || init.body === null ? undefined : new Uint8Array(await new Response(init.body).arrayBuffer());
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    return guarded(url, {
      method: init.method ?? "GET",
      headers,
      body,
      signal: init.signal ?? new AbortController().signal,
    });
  };
}
