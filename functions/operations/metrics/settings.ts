/**
 * Who may read GET /metrics (self-hosted only; the Worker has no /metrics):
 * - METRICS_BIND (`host:port`, e.g. `127.0.0.1:9464`): a second listener that
 *   serves only /metrics, on an address the API's clients cannot reach (loopback,
 *   a private interface). Its own answers need no token unless METRICS_TOKEN is set.
 * - METRICS_TOKEN (at least 32 characters): `Authorization: Bearer <token>` is
 *   required for /metrics, on the main port (where /metrics is then served) and
 *   on METRICS_BIND's listener.
 * Neither set: /metrics is not served at all (404 on the main port), so a new
 * instance exposes nothing an operator did not ask for.
 */
import { isIP } from "node:net";

export interface MetricsSettings {
  /** METRICS_BIND: the metrics-only listener's address. */
  bind?: { host: string; port: number };
  /** METRICS_TOKEN: the bearer token a scrape must send. */
  token?: string;
}

const problem = (name: string, why: string) => new Error(`Invalid configuration ${name}: ${why}`);

/** `host:port` or `[v6]:port`; port 0 picks a free one (tests). */
function parseBind(raw: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(raw.trim());
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (!m || !host || port > 65535) throw problem("METRICS_BIND", "must be host:port, e.g. 127.0.0.1:9464 or [::1]:9464");
  if (m[1] && isIP(host) !== 6) throw problem("METRICS_BIND", `'${host}' is not an IPv6 address`);
  return { host, port };
}

export function metricsSettingsFromEnv(env: Record<string, string | undefined>): MetricsSettings {
  const bind = env.METRICS_BIND?.trim() ? parseBind(env.METRICS_BIND) : undefined;
  const token = env.METRICS_TOKEN?.trim() || undefined;
  if (token !== undefined && (token.length < 32 || token.length > 512 || /\s/.test(token)))
    throw problem("METRICS_TOKEN", "must be 32 to 512 characters without spaces (e.g. openssl rand -hex 32)");
  return { bind, token };
}
