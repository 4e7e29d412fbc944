/**
 * The hostnames the API answers on the self-hosted listener. They are
 * configuration, never taken from a request: the Host a client sends is its
 * own choice, so "the host this request came in on" cannot tell the API's name
 * from an app's. The edge sends every other Host to an app, or answers its own
 * 404 when no app has it (functions/self-hosted/edge/edge.ts).
 *
 * The API's names: PUBLIC_URL's host, the API_HOSTS list, the loopback names
 * (`localhost`, `127.0.0.1`, `[::1]`) and the addresses the server binds (every
 * interface's address when HOST is `0.0.0.0` or `::`). None of them can become
 * a project's domain, free route or preview: loopback names and addresses are
 * not connectable hostnames, and configured names are refused by POST /connect
 * and reserved as slugs (functions/projects/connect.ts, slug.ts).
 */
import { networkInterfaces } from "node:os";

export const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"] as const;

/** A hostname or an IPv4 address: labels of letters, digits and inner hyphens (linear, anchored, no nested quantifier). */
const NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** PUBLIC_URL's host and API_HOSTS (comma-separated hostnames), lower-cased without a trailing dot; throws naming API_HOSTS. */
export function configuredApiHosts(publicUrl: string | undefined, raw: string | undefined): string[] {
  const hosts = new Set<string>();
  if (publicUrl) hosts.add(new URL(publicUrl).hostname.toLowerCase().replace(/\.$/, ""));
  for (const item of (raw ?? "").split(",")) {
    const name = item.trim().toLowerCase().replace(/\.$/, "");
    if (name === "") continue;
    if (name.length > 253 || !NAME.test(name))
      throw new Error(`Invalid configuration API_HOSTS: '${item.trim()}' is not a hostname (write names like api.example.com, without scheme, port or path)`);
    hosts.add(name);
  }
  return [...hosts];
}

const isLoopbackBind = (host: string) => host === "localhost" || host === "::1" || host.startsWith("127.");
const isWildcardBind = (host: string) => host === "0.0.0.0" || host === "::" || host === "[::]";

/** An address as a Host header names it (IPv6 in brackets), lower-cased. */
const asHost = (address: string) => (address.includes(":") ? `[${address.toLowerCase()}]` : address.toLowerCase());

/** The addresses a bind on `host` answers: every interface's for a wildcard, else the one address. */
function boundAddresses(host: string): string[] {
  if (!isWildcardBind(host)) return [asHost(host.replace(/^\[|\]$/g, ""))];
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) for (const info of list ?? []) out.push(asHost(info.address.replace(/%.*$/, "")));
  return out;
}

/** Every hostname the API answers (the edge's `apiHosts`). */
export function apiHostnames(config: { host: string; apiHosts: string[] }): string[] {
  return [...new Set([...LOOPBACK_HOSTS, ...boundAddresses(config.host), ...config.apiHosts])];
}

/** The start line's warning when the API is reachable from other machines but has no configured name; undefined when there is none to give. */
export function apiHostsWarning(config: { host: string; publicUrl?: string; apiHosts: string[] }): string | undefined {
  if (config.publicUrl || config.apiHosts.length > 0 || isLoopbackBind(config.host)) return undefined;
  return `Warning: HOST=${config.host} without PUBLIC_URL: the API answers only its loopback names and the addresses it binds; any other Host goes to the apps (or the edge's 404). Set PUBLIC_URL (and API_HOSTS for more names) to the address users reach the API at.`;
}
