/**
 * The free route's label. Derived from the name at creation: lower-cased, accents
 * dropped, every run of other characters turned into one `-`, trimmed to 40
 * characters (`project` when nothing is left). Free routes are global, so the slug
 * is unique across the deployment: when the base is taken (or reserved), a `-` and
 * 6 random characters are appended. Renaming a project never changes its slug.
 */
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

/** Candidates in order: the base (unless reserved), then random suffixes. */
export function slugCandidates(name: string, attempts = 5): string[] {
  const base = baseSlug(name);
  const out = RESERVED.has(base) ? [] : [base];
  while (out.length < attempts) out.push(`${base}-${suffix()}`);
  return out;
}
