/**
 * The edge's own answers (never the app's): small HTML pages, `no-store`, and an
 * `X-Workspace-Edge` header naming the reason so clients and tests can tell
 * them from the app's pages.
 */
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";

export type EdgeReason =
  | "disabled"
  | "not_deployed"
  | "bad_gateway"
  | "banned"
  | "denied"
  | "rate_limited"
  | "waking"
  | "too_long"
  | "bad_request"
  | "unknown_host"
  | "not_forwarded"
  | "server_unkeyed"
  | "server_no_url"
  | "server_unreachable"
  | "server_refused";

const TEXT: Record<EdgeReason, { status: number; title: string; message: string }> = {
  disabled: { status: 503, title: "Project disabled", message: "This project is disabled by its owner." },
  not_deployed: { status: 404, title: "Nothing deployed", message: "This project has no deployment serving here yet." },
  bad_gateway: { status: 502, title: "App not answering", message: "The app did not answer. It may be starting, restarting or failing." },
  banned: { status: 403, title: "Forbidden", message: "Access from your address is blocked." },
  denied: { status: 403, title: "Forbidden", message: "Access from your address is not allowed." },
  rate_limited: { status: 429, title: "Too many requests", message: "Too many requests from your address. Retry later." },
  waking: { status: 503, title: "Starting", message: "The app is starting. Retry in a moment." },
  bad_request: { status: 400, title: "Bad request", message: "The request could be read more than one way (its framing, Host or path), so it is refused." },
  unknown_host: { status: 404, title: "No app here", message: "No app is served at this address. Check the hostname." },
  too_long: { status: 414, title: "URI too long", message: "The request target is longer than this server takes." },
  // Forwarding to build servers (issue 22): the server's edge refusing a request, and the forwarding edge unable to forward.
  not_forwarded: {
    status: 403,
    title: "Forbidden",
    message: "This server's edge serves only requests forwarded and signed by its control plane: use the app's address.",
  },
  server_unkeyed: {
    status: 503,
    title: "Server cannot be reached",
    message:
      "The build server running this app was registered before forwarding existed and has no edge key: register it again (a new runner token) to serve its apps here.",
  },
  server_no_url: {
    status: 503,
    title: "Server cannot be reached",
    message: "The build server running this app has no public URL to forward requests to: set its publicUrl.",
  },
  server_unreachable: { status: 502, title: "Server not answering", message: "The build server running this app did not answer." },
  // Its publicUrl leads to a loopback, private, link-local or metadata address (functions/servers/public-url-guard.ts): nothing is sent there.
  server_refused: {
    status: 502,
    title: "Forwarding refused",
    message: "The build server's public URL leads to a private or internal address, where requests are not forwarded: give it a public address.",
  },
};

export const statusOf = (reason: EdgeReason) => TEXT[reason].status;

/** The page for `reason` (the Worker's edge answers with it too). */
export function pageOf(reason: EdgeReason): { status: number; html: string } {
  return { status: statusOf(reason), html: body(reason) };
}

function body(reason: EdgeReason): string {
  const t = TEXT[reason];
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${t.status} ${t.title}</title></head><body style="font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem"><h1>${t.title}</h1><p>${t.message}</p></body></html>`;
}

/** Writes the page for `reason`; returns the bytes written. */
export function sendPage(res: ServerResponse, reason: EdgeReason, headers: Record<string, string> = {}): number {
  const text = body(reason);
  const bytes = Buffer.byteLength(text);
  if (res.headersSent) {
    res.destroy();
    return 0;
  }
  res.writeHead(statusOf(reason), {
    "content-type": "text/html; charset=utf-8",
    "content-length": String(bytes),
    "cache-control": "no-store",
    "x-workspace-edge": reason,
    ...headers,
  });
  res.end(text);
  return bytes;
}

/** The same answer on a raw socket (a refused WebSocket upgrade), then closes it. */
export function sendPageOnSocket(socket: Socket, reason: EdgeReason, headers: Record<string, string> = {}): void {
  const text = body(reason);
  const t = TEXT[reason];
  const lines = [
    `HTTP/1.1 ${t.status} ${t.title}`,
    "content-type: text/html; charset=utf-8",
    `content-length: ${Buffer.byteLength(text)}`,
    "cache-control: no-store",
    `x-workspace-edge: ${reason}`,
    "connection: close",
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${lines.join("\r\n")}\r\n\r\n${text}`);
}
