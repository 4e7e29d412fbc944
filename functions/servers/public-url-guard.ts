/**
 * A server's `publicUrl` is where the control plane's edge sends requests: a
 * URL an organization admin chooses. Without a check, an admin could aim the
 * edge at the control plane's own network (loopback, 10.x, cloud metadata) and
 * read what answers through an app's address. So `publicUrl` passes the same
 * outbound guard as webhooks and git hosts (shared/outbound/address-guard.ts):
 * at registration and change its literal host is checked (400 naming
 * `publicUrl`), and at every forward the address actually connected to is
 * checked again (a name may resolve elsewhere later: DNS rebinding; see
 * ./forward-lookup-node.ts). OUTBOUND_ALLOW_PRIVATE=true lifts the private and
 * loopback refusal (a server on the operator's LAN); link-local and metadata
 * addresses stay refused. Runtime-neutral: no DNS here.
 */
import { refusalForHost, refusalMessage } from "../../shared/outbound/address-guard";

/** Why forwarding to this URL's host is refused before any lookup (a literal address or a local name), or null. */
export function publicUrlRefusal(publicUrl: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(publicUrl);
  } catch {
    return "The destination URL is not valid";
  }
  const refusal = refusalForHost(url.hostname, allowPrivate);
  return refusal ? refusalMessage(refusal) : null;
}
