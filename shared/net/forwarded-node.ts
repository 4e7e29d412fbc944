/**
 * One hop of a forwarding header as an address text: an `X-Forwarded-For`
 * entry or the value of a `Forwarded` element's `for=` (RFC 7239 §6), quoted
 * or not. Proxies write a hop as `192.0.2.60`, `192.0.2.60:4711`,
 * `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:4711` or `"[::ffff:192.0.2.60]:80"`;
 * the port is dropped (rules match addresses). Anything else (`unknown`,
 * an obfuscated `_hidden`, a bad port, stray text) is null: a hop whose
 * address is not known. The text is not checked to be an address here;
 * parseAddress does that.
 */

/** Longer than any address with brackets, quotes and a port. */
const MAX_NODE = 80;
const PORT = /^[0-9]{1,5}$/;

export function forwardedNodeText(raw: string): string | null {
  let node = raw.trim();
  if (node.length === 0 || node.length > MAX_NODE) return null;
  if (node.startsWith('"')) {
    if (node.length < 2 || !node.endsWith('"')) return null;
    node = node.slice(1, -1);
  }
  if (node.startsWith("[")) {
    const close = node.indexOf("]");
    if (close < 0) return null;
    const rest = node.slice(close + 1);
    if (rest !== "" && !(rest.startsWith(":") && PORT.test(rest.slice(1)))) return null;
    return node.slice(1, close);
  }
  const colon = node.indexOf(":");
  // One colon: IPv4 and a port. Two or more: a bare IPv6 address (no port can be told apart).
  if (colon >= 0 && node.indexOf(":", colon + 1) < 0) return PORT.test(node.slice(colon + 1)) ? node.slice(0, colon) : null;
  return node;
}

/** The `for=` value of one `Forwarded` element (`for=…;proto=…;by=…`), or null when it names none. */
export function forwardedForParam(element: string): string | null {
  for (const pair of element.split(";")) {
    const eq = pair.indexOf("=");
    if (eq > 0 && pair.slice(0, eq).trim().toLowerCase() === "for") return pair.slice(eq + 1).trim();
  }
  return null;
}
