/**
 * The free route's label. Derived from the name at creation: lower-cased, accents
 * dropped, every run of other characters turned into one `-`, trimmed to 40
 * characters (`project` when nothing is left). Free routes are global, so the slug
 * is unique across the deployment: when the base is taken (or reserved), a `-` and
 * 6 random characters are appended. Renaming a project never changes its slug.
 */
import type { ServiceConfig } from "../../shared/http/context";

const RESERVED = new Set(["www", "api", "app", "admin", "dashboard", "status", "mail", "docs"]);
const ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789";

function baseSlug(name: string): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
  return slug || "project";
}

function suffix(): string {
  let out = "";
  for (const b of crypto.getRandomValues(new Uint8Array(6))) out += ALPHABET[b % ALPHABET.length];
  return out;
}

function hostOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return new URL(url).hostname.toLowerCase().replace(/\.$/, "");
  } catch {
    return undefined;
  }
}

/**
 * Slugs this instance's own configuration reserves besides the fixed list: when
 * one of the API's configured names (PUBLIC_URL's host, API_HOSTS) is
 * `<label>.<SHARED_DOMAIN>`, a project with the slug `<label>` would own it as
 * its free route (and the edge would send API traffic, bearer tokens included,
 * to that app). A label with `--` reserves its part before the first `--`,
 * since `<slug>--<environment>` is a preview hostname (a slug never holds `--`).
 */
export function configReservedSlugs(config: Pick<ServiceConfig, "sharedDomain" | "publicUrl" | "apiHosts">): string[] {
  const shared = config.sharedDomain.toLowerCase().replace(/\.$/, "");
  const names = [hostOf(config.publicUrl), ...(config.apiHosts ?? [])];
  const out = new Set<string>();
  for (const host of names) {
    if (!host?.endsWith(`.${shared}`)) continue;
    const label = host.slice(0, -shared.length - 1);
    if (label.includes(".") || label === "") continue;
    const slug = label.split("--")[0]!;
    if (slug !== "") out.add(slug);
  }
  return [...out];
}

/** Candidates in order: the base (unless reserved, by the fixed list or by `reserved`), then random suffixes. */
export function slugCandidates(name: string, reserved: readonly string[] = [], attempts = 5): string[] {
  const base = baseSlug(name);
  const out = RESERVED.has(base) || reserved.includes(base) ? [] : [base];
  while (out.length < attempts) out.push(`${base}-${suffix()}`);
  return out;
}
