/**
 * Permission tags and what each membership role grants. Effective permissions of a
 * request = the role's tags ∩ the token's scopes, computed on every request.
 */
export const TAGS = [
  "project:list",
  "project:read",
  "project:write",
  "project:admin",
  "project:deployment:list",
  "settings:read",
  "settings:write",
  "notifications:read",
  "notifications:write",
  "notifications:admin",
  /** Ours, not the spec's: manage members and invitations. */
  "org:admin",
  /** Ours: list, mint and revoke the caller's own tokens. Every role holds it. */
  "token:manage",
] as const;

export type Tag = (typeof TAGS)[number];

export const ROLES = ["owner", "admin", "member", "viewer"] as const;
export type Role = (typeof ROLES)[number];

const ADMIN_ONLY: readonly Tag[] = ["project:admin", "notifications:admin", "org:admin"];

export const ROLE_TAGS: Record<Role, readonly Tag[]> = {
  owner: TAGS,
  admin: TAGS,
  member: TAGS.filter((t) => !ADMIN_ONLY.includes(t)),
  viewer: [
    "project:list",
    "project:read",
    "project:deployment:list",
    "settings:read",
    "settings:write",
    "notifications:read",
    "notifications:write",
    "token:manage",
  ],
};

/**
 * Tags every role holds because they concern only the caller's own things (their
 * tokens), not the organization's: a token holds them through its scopes alone, so
 * a user who belongs to no organization can still revoke their tokens.
 */
const PERSONAL_TAGS: readonly Tag[] = ["token:manage"];

/** Whether a token with these scopes holds `tag` whatever its organization (see PERSONAL_TAGS). */
export function holdsPersonalTag(scopes: readonly string[] | null, tag: Tag): boolean {
  return PERSONAL_TAGS.includes(tag) && (scopes === null || scopes.includes(tag));
}

export function isTag(value: string): value is Tag {
  return (TAGS as readonly string[]).includes(value);
}

/** Role tags narrowed by a token's scopes (null scopes = no narrowing: the role's own list, read-only, not a copy per request). */
export function effectiveTags(role: Role, scopes: readonly string[] | null): readonly Tag[] {
  const granted = ROLE_TAGS[role];
  return scopes ? granted.filter((t) => scopes.includes(t)) : granted;
}
